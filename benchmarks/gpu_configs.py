"""A few given configurations on a GPU host, each on its own server at several concurrencies,
with the draft tokens the server proposed per draft at each load (``k applied``).

Used for what the step-cost table does not cover: whether vLLM applies a k-by-batch-size
schedule (``num_speculative_tokens_per_batch_size``) at each load, and how a start option
(the engine in the API server's process) changes the figures at load. Each configuration is a
trial through the product's path (``measure_config_at_loads``; acceptance fixed with the
product's ``--synthetic-acceptance``). Rows are written to ``--out`` after each configuration.

    python benchmarks/gpu_configs.py --target /root/models/target --out gpu-configs.json \\
        --server-cmd "python3 -m vllm.entrypoints.cli.main serve {model}" \\
        --config 'sched={"method": "eagle3", "model": "/root/models/eagle3-8b", "num_speculative_tokens": 4,
                  "num_speculative_tokens_per_batch_size": [[1, 4, 4], [5, 16, 2], [17, 512, 1]]}' \\
        --config 'baseline-mp=baseline' --env-for baseline-mp VLLM_ENABLE_V1_MULTIPROCESSING=1
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from dataclasses import replace
from pathlib import Path

from tuner.engine import ServerOptions, SpecConfig
from tuner.engine.installed import gpu_name
from tuner.replay import LoadSpec
from tuner.measure.trial import MeasureSettings, measure_config_at_loads
from tuner.workload import load_workload

from gpu_step_cost import EAGLE3_PROFILE  # the published EAGLE-3 profile (vllm#26191)

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True)
    parser.add_argument("--config", action="append", required=True, help="NAME=JSON or NAME=baseline")
    parser.add_argument("--env-for", nargs=2, action="append", default=[], metavar=("NAME", "KEY=VALUE"),
                        help="an environment variable for one configuration's server")
    parser.add_argument("--concurrency", default="1,8,32")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--rates", default=",".join(map(str, EAGLE3_PROFILE)))
    parser.add_argument("--server-cmd", default=None)
    parser.add_argument("--server-arg", action="append", default=["--load-format=dummy", "--max-model-len=4096"])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    loads = [LoadSpec("concurrency", int(c)) for c in args.concurrency.split(",")]
    loaded = load_workload(ROOT / "workloads" / "code.jsonl")
    requests = [replace(r, max_tokens=args.max_tokens, output_tokens=args.max_tokens)
                for r in loaded.requests[:args.requests]]
    workload = replace(loaded, requests=tuple(requests))
    rates = tuple(float(r) for r in args.rates.split(","))
    env_for: dict[str, dict[str, str]] = {}
    for name, pair in args.env_for:
        key, _, value = pair.partition("=")
        env_for.setdefault(name, {})[key] = value
    meta = {"gpu": gpu_name(), "target": args.target, "rates": list(rates), "requests": args.requests,
            "max_tokens": args.max_tokens, "repeats": args.repeats,
            "command": shlex.join(["python3", "benchmarks/gpu_configs.py", *sys.argv[1:]])}
    rows: list[dict] = []
    for item in args.config:
        name, _, text = item.partition("=")
        spec = None if text == "baseline" else SpecConfig.from_vllm(json.loads(text))
        server = ServerOptions(server_cmd=args.server_cmd, server_args=list(args.server_arg),
                               env=env_for.get(name, {}), log_dir=args.out.parent / "logs", gpus=(0,),
                               synthetic_acceptance=rates)
        settings = MeasureSettings(load=loads[0], extra_loads=tuple(loads[1:]), repeats=args.repeats,
                                   warmup=4, server=server, retries=1, retry_wait_s=5.0)
        t0 = time.monotonic()
        try:
            measured = measure_config_at_loads(args.target, spec, workload, settings)
        except Exception as exc:  # noqa: BLE001 - one failed config must not lose the others
            print(f"{name}: FAILED {str(exc)[:400]}", flush=True)
            rows.append({"name": name, "config": spec.to_vllm() if spec else None, "failed": str(exc)[:2000]})
        else:
            for m in measured:
                acc = m.acceptance
                rows.append({
                    "name": name, "config": spec.to_vllm() if spec else None, "env": env_for.get(name, {}),
                    "load": m.load, "runs": [r.summary.output_tokens_per_s for r in m.runs],
                    "tokens_per_s": m.summary.output_tokens_per_s,
                    "tpot_p50_s": m.summary.tpot.p50 if m.summary.tpot else None,
                    "drafts": acc.drafts if acc else None, "draft_tokens": acc.draft_tokens if acc else None,
                    "k_applied": acc.draft_tokens / acc.drafts if acc and acc.drafts else None,
                    "mean_acceptance_length": acc.mean_acceptance_length if acc else None,
                    "startup_s": m.server.startup_s, "vllm_version": m.server.vllm_version,
                    "command": m.server.command})
                k = f", {rows[-1]['k_applied']:.2f} draft tokens per draft" if rows[-1]["k_applied"] else ""
                print(f"{name} {m.load}: {m.summary.output_tokens_per_s:.1f} tok/s{k}", flush=True)
            print(f"{name}: start {measured[0].server.startup_s:.1f} s, trial {time.monotonic() - t0:.1f} s", flush=True)
        args.out.write_text(json.dumps({**meta, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
