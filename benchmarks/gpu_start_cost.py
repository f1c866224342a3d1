"""Where a trial's server start goes on a GPU host, and what vLLM's own options cut from it.

Each variant is one real trial through the product's path (``measure_config``: a fresh server,
warm-up, replay, ``/metrics``): its start-up (process start to ``/health``), the phases vLLM's
log reports (weight load, torch.compile, CUDA graph capture, engine init), the replay, and the
wait for the GPU's memory to be free after the server stopped (NVML, ``wait_until_free``, what
the next trial's start waits for). Variants run in the order given, so "cold" and "warm" compile
caches are the first and later starts of one host. Results go to a JSON file with the GPU name,
vLLM version and exact server commands.

    python benchmarks/gpu_start_cost.py --model /root/models/target --out gpu-start.json \\
        --server-cmd "python3 -m vllm.entrypoints.cli.main serve {model}" \\
        --variant default --variant default --variant 'graphs=1,2,4+inproc'
"""

from __future__ import annotations

import argparse
import json
import re
import time
from dataclasses import replace
from pathlib import Path

from tuner.engine import ServerOptions, SpecConfig
from tuner.engine.gpus import wait_until_free
from tuner.engine.installed import gpu_name
from tuner.replay import LoadSpec
from tuner.measure.trial import MeasureSettings, measure_config
from tuner.workload import load_workload

ROOT = Path(__file__).resolve().parents[1]
# vLLM's timing lines: "Loading weights took 1.23 seconds", "torch.compile takes 20.1 s in
# total", "Graph capturing finished in 11 secs", "init engine (...) took 30.2 seconds", ...
_TIMED = re.compile(r"\] (?P<what>[^\d]*?(?:took|takes|finished in|in)) (?P<s>[\d.]+) ?(?:s|sec|secs|seconds)\b(?P<rest>.*)$")


def phases(log_path: Path) -> list[dict]:
    """Every line of the server log that reports a duration, as (what, seconds)."""
    found = []
    for line in log_path.read_text(errors="replace").splitlines():
        if match := _TIMED.search(line):
            found.append({"what": (match["what"] + " " + match["rest"].strip()).strip()[:160],
                          "seconds": float(match["s"])})
    return found


def variant(name: str) -> tuple[list[str], dict[str, str]]:
    """Server arguments and environment of a variant: parts joined by '+', each ``default``,
    ``graphs=1,2,4`` (capture CUDA graphs only for those batch sizes), ``inproc`` (the engine
    core in the API server's process: one Python start and vLLM import instead of two) or
    ``debug`` (vLLM's debug log, to see what a start waits for)."""
    args: list[str] = []
    env: dict[str, str] = {}
    for part in name.split("+"):
        if part == "default":
            continue
        if part.startswith("graphs="):
            sizes = [int(x) for x in part.split("=", 1)[1].split(",")]
            args += ["--compilation-config", json.dumps({"cudagraph_capture_sizes": sizes})]
        elif part == "inproc":
            env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        elif part == "debug":
            env["VLLM_LOGGING_LEVEL"] = "DEBUG"
        else:
            raise SystemExit(f"unknown variant part {part!r}: use default, graphs=1,2,4, inproc, debug")
    return args, env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--spec", default=None, help="speculative config JSON (default: the baseline)")
    parser.add_argument("--workload", default=str(ROOT / "workloads" / "code.jsonl"))
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--server-cmd", default=None)
    parser.add_argument("--server-arg", action="append", default=["--load-format=dummy"])
    parser.add_argument("--variant", action="append", required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    loaded = load_workload(args.workload)
    workload = replace(loaded, requests=tuple(replace(r, max_tokens=args.max_tokens, output_tokens=args.max_tokens)
                                              for r in loaded.requests[:args.requests]))
    spec = SpecConfig.from_json(args.spec) if args.spec else None
    results = []
    for name in args.variant:
        extra_args, env = variant(name)
        server = ServerOptions(server_cmd=args.server_cmd, server_args=[*args.server_arg, *extra_args],
                               env=env, log_dir=args.out.parent / "logs", gpus=(0,))
        started = time.monotonic()
        m = measure_config(args.model, spec, workload,
                           MeasureSettings(load=LoadSpec("concurrency", args.concurrency), server=server))
        trial_s = time.monotonic() - started
        waited = time.monotonic()
        wait_until_free((0,), timeout_s=300)
        free_wait_s = time.monotonic() - waited
        run = m.runs[0]
        row = {"variant": name, "startup_s": m.server.startup_s, "trial_s": trial_s,
               "start_fraction": m.server.startup_s / trial_s, "replay_s": run.summary.duration_s,
               "tokens_per_s": run.summary.output_tokens_per_s, "tpot_p50_ms": run.summary.tpot.p50 * 1e3,
               "gpu_free_wait_s": free_wait_s, "phases": phases(Path(m.server.log_path)),
               "env": env, "command": m.server.command, "vllm_version": m.server.vllm_version}
        results.append(row)
        print(f"{name}: start {row['startup_s']:.1f} s of a {trial_s:.1f} s trial "
              f"({row['start_fraction']:.0%}), replay {row['replay_s']:.1f} s, {row['tokens_per_s']:.1f} tok/s, "
              f"GPU free {free_wait_s:.2f} s after stop", flush=True)
        for phase in row["phases"]:
            print(f"    {phase['seconds']:8.2f} s  {phase['what']}")
        args.out.write_text(json.dumps({"gpu": gpu_name(), "model": args.model, "spec": args.spec,
                                        "requests": args.requests, "max_tokens": args.max_tokens,
                                        "concurrency": args.concurrency, "results": results}, indent=2))


if __name__ == "__main__":
    main()
