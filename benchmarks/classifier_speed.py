"""How long `tuner workload split` takes to classify requests, on one core, model loaded once.

    .venv/bin/python benchmarks/classifier_speed.py [--requests 10000] [--repeats 3]

The requests are the labelled prompts of benchmarks/data/classifier/ (train and held-out, types
cleared), repeated up to ``--requests``: short questions, code, and long articles and retrieved
documents as real traffic mixes them. The process is pinned to one CPU and BLAS to one thread.
Prints the load time of the model (imports included) and, per repeat, the time to classify all
requests and the time per thousand.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time
from pathlib import Path

from threadpoolctl import threadpool_limits

from tuner.workload.model import Request

DATA = Path(__file__).resolve().parent / "data" / "classifier"


def requests(count: int) -> list[Request]:
    rows = [json.loads(line) for name in ("heldout.jsonl", "train.jsonl")
            for line in (DATA / name).read_text(encoding="utf-8").splitlines()]
    return [Request(line=i + 1, prompt=row.get("prompt"),
                    messages=tuple(row["messages"]) if "messages" in row else None)
            for i, row in zip(range(count), itertools.cycle(rows))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.requests < 1 or args.repeats < 1:
        print("error: --requests and --repeats must be at least 1", file=sys.stderr)
        return 2
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    batch = requests(args.requests)
    chars = sum(len(r.prompt or "") + sum(len(m["content"]) for m in r.messages or ())
                for r in batch)
    with threadpool_limits(1):
        start = time.perf_counter()
        from tuner.workload.classify import guess_all
        from tuner.workload.type_model import shipped_model
        shipped_model()
        print(f"model weights load: {time.perf_counter() - start:.2f} s (scikit-learn is imported "
              "by the first run)")
        print(f"{len(batch)} requests, {chars / len(batch):.0f} characters on average, one core")
        times = []
        for repeat in range(args.repeats):
            start = time.perf_counter()
            guess_all(batch)
            times.append(time.perf_counter() - start)
            print(f"  run {repeat + 1}: {times[-1]:.2f} s = "
                  f"{times[-1] / len(batch) * 1000:.3f} s per thousand")
    print(f"median: {statistics.median(times) / len(batch) * 1000:.3f} s per thousand requests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
