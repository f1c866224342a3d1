"""Wall time of one study with 1 and with 2 workers, side by side, on the real vLLM CPU build.

Each run is a fresh study of the same space (the baseline and ngram at each k, grid strategy,
every configuration measured once) on a new PostgreSQL database; `--workers 2` starts a second
`tuner worker` beside `tuner optimize`. On a GPU host each worker owns its GPUs and the gain is
close to the number of workers; here both servers share the machine's CPU cores, so the gain is
what the cores allow (printed with the CPU count). Runs alternate (1, 2, 1, 2, ...) so that drift
of this shared machine falls on both sides.

  python benchmarks/workers_wall_time.py --rounds 1 --k 1-5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from sqlalchemy import create_engine, text

ROOT = Path(__file__).resolve().parent.parent
ADMIN = os.environ.get("TUNER_TEST_POSTGRES", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")


def fresh_database() -> str:
    name = f"tuner_bench_{uuid.uuid4().hex[:10]}"
    with create_engine(ADMIN, isolation_level="AUTOCOMMIT").connect() as connection:
        connection.execute(text(f"CREATE DATABASE {name}"))
    return ADMIN.rsplit("/", 1)[0] + "/" + name


def drop_database(url: str) -> None:
    with create_engine(ADMIN, isolation_level="AUTOCOMMIT").connect() as connection:
        connection.execute(text(f"DROP DATABASE IF EXISTS {url.rsplit('/', 1)[1]} WITH (FORCE)"))


def small_workload(folder: Path, requests: int) -> Path:
    lines = (ROOT / "workloads" / "code.jsonl").read_text().splitlines()[:requests]
    path = folder / "code.jsonl"
    path.write_text("".join(json.dumps({**json.loads(line), "max_tokens": 32}) + "\n" for line in lines))
    return path


def run_study(workers: int, k: str, workload: Path, models: Path, folder: Path) -> float:
    db = fresh_database()
    try:
        started = time.monotonic()
        subprocess.run([sys.executable, "-m", "tuner.cli", "optimize", "--workload", str(workload),
                        "--model", str(models / "target"), "--method", "ngram", "--k", k, "--strategy", "grid",
                        "--warmup", "1", "--workers", str(workers), "--db", db, "--log-dir", str(folder / "logs"),
                        "--server-arg=--enforce-eager", "--server-arg=--max-model-len=1024"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"),
                            "HF_HUB_OFFLINE": "1"})
        return time.monotonic() - started
    finally:
        drop_database(db)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--k", default="1-5", help="ngram k values (the baseline is added)")
    parser.add_argument("--requests", type=int, default=10, help="requests per replay (32 tokens each)")
    parser.add_argument("--models", type=Path, default=ROOT / ".models")
    args = parser.parse_args()
    times: dict[int, list[float]] = {1: [], 2: []}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        workload = small_workload(folder, args.requests)
        for round_ in range(args.rounds):
            for workers in (1, 2) if round_ % 2 == 0 else (2, 1):
                times[workers].append(run_study(workers, args.k, workload, args.models, folder))
                print(f"round {round_ + 1}: {workers} worker(s): {times[workers][-1]:.0f} s", flush=True)
    one, two = statistics.median(times[1]), statistics.median(times[2])
    print(f"\n{os.cpu_count()} CPU cores, space: baseline + ngram k={args.k}, {args.rounds} round(s)")
    print("| workers | wall time (median) |")
    print("| --- | --- |")
    print(f"| 1 | {one:.0f} s |")
    print(f"| 2 | {two:.0f} s |")
    print(f"2 workers take {two / one:.2f}x the time of 1 ({one / two:.2f}x faster)")


if __name__ == "__main__":
    main()
