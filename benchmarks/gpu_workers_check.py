"""Issue 49 item 1 on one GPU (benchmarks/gpu_workers.sh): what the shared study on PostgreSQL holds,
which trials ran at the same time (two workers), and the nvidia-smi samples with 2+ servers on GPU 0.

Usage: python3 benchmarks/gpu_workers_check.py postgresql://tuner@127.0.0.1:55432/tuner /root/run
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import optuna


def trials(url: str) -> None:
    if url.startswith("postgresql://"):  # psycopg 3, as tuner/store/db.py does
        url = "postgresql+psycopg://" + url.split("://", 1)[1]
    storage = optuna.storages.RDBStorage(url)
    for summary in optuna.get_all_study_summaries(storage):
        study = optuna.load_study(study_name=summary.study_name, storage=storage)
        rows = study.get_trials(deepcopy=False)
        print(f"study {summary.study_name!r}: {len(rows)} trials on {url}")
        for t in rows:
            took = (t.datetime_complete - t.datetime_start).total_seconds() if t.datetime_complete and t.datetime_start else None
            value = t.values if t.values is None else [round(v, 2) for v in t.values]
            began = f"{t.datetime_start:%H:%M:%S}" if t.datetime_start else "-"
            print(f"  #{t.number} {t.state.name:8} start {began} "
                  f"took {took if took is None else round(took)}s params {t.params} value {value} "
                  f"{t.user_attrs.get('failure_cause', '')}")
        spans = [(t.number, t.datetime_start, t.datetime_complete) for t in rows if t.datetime_start and t.datetime_complete]
        both = [(a[0], b[0]) for i, a in enumerate(spans) for b in spans[i + 1:] if a[1] < b[2] and b[1] < a[2]]
        print(f"  trials that ran at the same time: {both or 'none'}")


def samples(run: Path) -> None:
    text = (run / "nvsmi.txt").read_text() if (run / "nvsmi.txt").exists() else ""
    blocks = [b for b in text.split("=== ") if b.strip()]
    most, best = 0, None
    for block in blocks:
        apps = [line for line in block.splitlines() if re.match(r"^\d+, ", line) and "MiB" in line]
        if len(apps) > most:
            most, best = len(apps), block
    print(f"nvidia-smi samples: {len(blocks)}; most compute processes at once on the GPU: {most}")
    if best:
        print("the first sample with that many:\n" + "\n".join("  " + line for line in best.splitlines()))


if __name__ == "__main__":
    try:
        trials(sys.argv[1])
    except Exception as exc:  # the report goes on with the samples
        print(f"could not read the study: {exc!r}")
    samples(Path(sys.argv[2]))
