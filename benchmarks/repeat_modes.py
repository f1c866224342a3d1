"""Repeats on one server (prefix cache reset between runs) against a fresh server per run.

Measures the same configuration N times each way, in one run of this script, and prints the
medians, spreads and time spent side by side: the tuner's --repeats uses the first way.

    .venv/bin/python benchmarks/repeat_modes.py [--spec JSON] [--repeats 3] [--workload FILE]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from tuner.engine import ServerOptions, SpecConfig
from tuner.replay import LoadSpec
from tuner.decide.stats import repeat_stats
from tuner.measure.trial import MeasureSettings, measure_config
from tuner.workload import load_workload

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / ".models" / "target"))
    parser.add_argument("--workload", default=str(ROOT / "workloads" / "code.jsonl"))
    parser.add_argument("--spec", default='{"method": "ngram", "num_speculative_tokens": 3, '
                                          '"prompt_lookup_min": 2, "prompt_lookup_max": 4}')
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    workload = load_workload(args.workload)
    spec = SpecConfig.from_json(args.spec)
    server = ServerOptions(server_args=["--enforce-eager", "--max-model-len=1024"],
                           log_dir=ROOT / ".tuner" / "logs")
    load = LoadSpec("concurrency", args.concurrency)

    started = time.monotonic()
    same = measure_config(args.model, spec, workload,
                          MeasureSettings(load=load, repeats=args.repeats, server=server))
    same_s = time.monotonic() - started
    same_runs = [r.summary.output_tokens_per_s for r in same.runs]

    started = time.monotonic()
    fresh_runs = [measure_config(args.model, spec, workload, MeasureSettings(load=load, server=server))
                  .runs[0].summary.output_tokens_per_s for _ in range(args.repeats)]
    fresh_s = time.monotonic() - started

    table = Table(title=f"{spec.label}, {workload.type}, {load.label}, {args.repeats} runs each")
    for column in ("mode", "tok/s per run", "median", "MAD", "MAD / median", "wall time s"):
        table.add_column(column, justify="left" if column in ("mode", "tok/s per run") else "right")
    for mode, runs, wall in (("one server, cache reset", same_runs, same_s),
                             ("fresh server per run", fresh_runs, fresh_s)):
        stats = repeat_stats(runs)
        table.add_row(mode, " ".join(f"{x:.1f}" for x in runs), f"{stats.median:.1f}",
                      f"{stats.mad:.1f}", f"{stats.mad / stats.median:.1%}", f"{wall:.0f}")
    Console(width=150).print(table)
    print(f"median ratio one-server / fresh: {repeat_stats(same_runs).median / repeat_stats(fresh_runs).median:.3f}")


if __name__ == "__main__":
    main()
