"""Same-server replays left to the scheduler against the tuner and vLLM kept on one core.

On the CPU build the engine's OpenMP thread, vLLM's API server and the tuner's replay client
share the host's cores. This measures one configuration N times on one server each way, in one
run of this script, and prints every replay's tokens/s and the spread side by side. Pinning is
done by restricting this process (the client) before it starts the server, which inherits the
restriction; vLLM's CPU build then binds its OpenMP thread inside it.

    .venv/bin/python benchmarks/cpu_pinning.py [--spec JSON] [--repeats 6] [--cpu N]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from tuner.engine import ServerOptions, SpecConfig
from tuner.replay import LoadSpec
from tuner.decide.stats import repeat_stats
from tuner.measure.trial import MeasureSettings, measure_config
from tuner.workload import load_workload

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from search_efficiency import long_workload  # noqa: E402  (the search table's workload)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / ".models" / "target"))
    parser.add_argument("--spec", default='{"method": "ngram", "num_speculative_tokens": 4, '
                                          '"prompt_lookup_min": 2, "prompt_lookup_max": 4}')
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--cpu", type=int, default=max(os.sched_getaffinity(0)))
    args = parser.parse_args()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    workload = load_workload(long_workload(), "code")
    spec = SpecConfig.from_json(args.spec)
    settings = MeasureSettings(load=LoadSpec("concurrency", args.concurrency), warmup=8, repeats=args.repeats,
                               server=ServerOptions(server_args=["--enforce-eager", "--max-model-len=1024"],
                                                    log_dir=ROOT / ".tuner" / "logs"))
    cores = sorted(os.sched_getaffinity(0))
    free = measure_config(args.model, spec, workload, settings)
    os.sched_setaffinity(0, {args.cpu})
    pinned = measure_config(args.model, spec, workload, settings)

    table = Table(title=f"{spec.label}, {len(workload)} requests, concurrency {args.concurrency}, "
                        f"{args.repeats} replays on one server each way")
    for column in ("placement", "tok/s per replay", "median", "MAD / median", "min-max / median"):
        table.add_column(column, justify="left" if column in ("placement", "tok/s per replay") else "right")
    for placement, measured in ((f"cores {cores} (the scheduler's choice)", free),
                                (f"core {args.cpu} only", pinned)):
        runs = [r.summary.output_tokens_per_s for r in measured.runs]
        stats = repeat_stats(runs)
        table.add_row(placement, " ".join(f"{r:.0f}" for r in runs), f"{stats.median:.1f}",
                      f"{stats.mad / stats.median:.1%}", f"{(max(runs) - min(runs)) / stats.median:.1%}")
    Console().print(table)


if __name__ == "__main__":
    main()
