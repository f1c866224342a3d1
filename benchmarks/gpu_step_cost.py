"""Real GPU step costs: each (drafter, k) on one server, replayed at several concurrencies.

The target is served with dummy weights (``--load-format=dummy``) and acceptance is fixed with
vLLM's synthetic rejection sampler (``rejection_sample_method: "synthetic"``, per-position rates:
the chance that the first i+1 drafts are all accepted), so every figure is a real GPU step cost
at a known acceptance. Each configuration is one trial through the product's path
(``measure_config_at_loads``: a fresh server, warm-up, replays at every load, ``/metrics``).

Written to ``--out-dir`` after every configuration (so a call cut short keeps what it measured):
``gpu-step-cost.json`` (every row, the GPU, vLLM version, shapes and commands) and one table per
load, ``gpu-grid-c{N}.json``, in the format ``benchmarks/search_efficiency.py simulate --table``
reads. ``--resume FILE`` skips the configurations FILE already holds.

    python benchmarks/gpu_step_cost.py --target /root/models/target --out-dir OUT \\
        --server-cmd "python3 -m vllm.entrypoints.cli.main serve {model}" \\
        --drafter eagle3=/root/models/eagle3-8b --drafter draft_model=/root/models/draft \\
        --k 1,2,4,8 --concurrency 1,8,32 --repeats 2 --budget-s 540
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from dataclasses import replace
from pathlib import Path

from tuner.engine import ServerOptions
from tuner.engine.installed import gpu_name
from tuner.replay import LoadSpec
from tuner.plan.space import SearchSpace, block_ks
from tuner.measure.trial import MeasureSettings, measure_config_at_loads
from tuner.workload import load_workload

ROOT = Path(__file__).resolve().parents[1]
# Published EAGLE-3 profile: yuhuili/EAGLE3-LLaMA3.1-Instruct-8B on Llama-3.1-8B-Instruct,
# MT-Bench, temperature 0, k=7 ("acceptance at token i", vllm-project/vllm issue #26191, the
# figures before the regression it reports); the 8th position extends its ratio (0.13 x 0.77).
EAGLE3_PROFILE = (0.74, 0.54, 0.41, 0.31, 0.23, 0.17, 0.13, 0.10)


def row_of(candidate, m, startup_s: float) -> dict:
    acc = m.acceptance
    return {"label": candidate.label, "config": candidate.spec.to_vllm() if candidate.spec else None,
            "load": m.load, "runs": [r.summary.output_tokens_per_s for r in m.runs],
            "per_position": list(acc.per_position) if acc else None,
            "mean_acceptance_length": acc.mean_acceptance_length if acc else None,
            "tpot_p50_s": m.summary.tpot.p50 if m.summary.tpot else None,
            "tpot_p99_s": m.summary.tpot.p99 if m.summary.tpot else None,
            "startup_s": startup_s, "vllm_version": m.server.vllm_version,
            "command": m.server.command, "measured_on": time.strftime("%Y-%m-%d")}


def write(out_dir: Path, meta: dict, rows: list[dict], space: SearchSpace, loads: list[LoadSpec],
          tables: str = "gpu-grid") -> None:
    (out_dir / "gpu-step-cost.json").write_text(json.dumps({**meta, "rows": rows}, indent=1))
    in_space = {json.dumps(c.spec.to_vllm() if c.spec else None, sort_keys=True) for c in space.candidates()}
    for load in loads:
        at = [r for r in rows if r["load"] == load.label and json.dumps(r["config"], sort_keys=True) in in_space]
        table = {"study": f"gpu step cost | {load.label}", "host": meta["gpu"], "gpu": meta["gpu"],
                 "vllm_version": meta["vllm_version"], "load": load.label, "command": meta["command"],
                 "space": space.to_dict(), "measured_again": [], "acceptance_profile": meta["rates"],
                 "configs": [{k: r[k] for k in ("label", "config", "runs", "per_position", "tpot_p99_s",
                                                "vllm_version", "load")} for r in at]}
        (out_dir / f"{tables}-c{load.concurrency}.json").write_text(json.dumps(table, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True)
    parser.add_argument("--drafter", action="append", default=[], help="METHOD=PATH, repeatable; ngram takes none")
    parser.add_argument("--k", default="1,2,4,8")
    parser.add_argument("--concurrency", default="1,8,32")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--rates", default=",".join(map(str, EAGLE3_PROFILE)))
    parser.add_argument("--server-cmd", default=None)
    parser.add_argument("--server-arg", action="append", default=["--load-format=dummy", "--max-model-len=4096"])
    parser.add_argument("--inproc", action="store_true", help="VLLM_ENABLE_V1_MULTIPROCESSING=0 (a faster start)")
    parser.add_argument("--budget-s", type=float, default=540.0, help="start no configuration after this")
    parser.add_argument("--resume", type=Path, default=None)
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument("--tables", default="gpu-grid", help="name of the per-load tables: NAME-cN.json")
    parser.add_argument("--tables-only", action="store_true",
                        help="measure nothing: write the tables of --drafter x --k from the --resume rows")
    args = parser.parse_args()

    methods: list[str] = []
    drafts: dict[str, list[str]] = {}
    for d in args.drafter:
        method, _, path = d.partition("=")
        if method not in methods:
            methods.append(method)
        if path:
            drafts.setdefault(method, []).append(path)
    chosen = {m: tuple(p) for m, p in drafts.items()}
    # A block drafter's k is its checkpoint's block size (--k does not apply to it).
    space = SearchSpace(methods=tuple(methods), ks=tuple(int(k) for k in args.k.split(",")),
                        drafts=chosen, fixed_k=block_ks(chosen, {}))
    rates = tuple(float(r) for r in args.rates.split(","))
    loads = [LoadSpec("concurrency", int(c)) for c in args.concurrency.split(",")]
    loaded = load_workload(ROOT / "workloads" / "code.jsonl")
    requests = [replace(r, max_tokens=args.max_tokens, output_tokens=args.max_tokens)
                for r in loaded.requests[:args.requests]]
    workload = replace(loaded, requests=tuple(requests))
    env = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"} if args.inproc else {}
    server = ServerOptions(server_cmd=args.server_cmd, server_args=list(args.server_arg), env=env,
                           log_dir=args.out_dir / "logs", gpus=(0,), synthetic_acceptance=rates)
    settings = MeasureSettings(load=loads[0], extra_loads=tuple(loads[1:]), repeats=args.repeats,
                               warmup=4, server=server, retries=1, retry_wait_s=5.0)
    earlier = json.loads(args.resume.read_text()) if args.resume and args.resume.exists() else {}
    rows = earlier.get("rows", [])
    done = {json.dumps(r["config"], sort_keys=True) for r in rows}
    if args.tables_only:  # a space that the rows of several runs cover, for simulate --table
        write(args.out_dir, {k: v for k, v in earlier.items() if k != "rows"}, rows, space, loads, args.tables)
        return
    meta = {"gpu": gpu_name(), "vllm_version": None, "target": args.target, "rates": list(rates),
            "rates_source": "vllm-project/vllm issue #26191 (EAGLE3-LLaMA3.1-Instruct-8B, MT-Bench, k=7)"
            if rates == EAGLE3_PROFILE else "given with --rates",
            "requests": args.requests, "max_tokens": args.max_tokens, "repeats": args.repeats,
            "env": env, "command": shlex.join(["python3", "benchmarks/gpu_step_cost.py", *sys.argv[1:]]),
            "shapes": {p: json.loads((Path(p) / "config.json").read_text())
                       for p in [args.target, *[x for ps in drafts.values() for x in ps]]}}
    # A resumed table keeps the shapes and commands of the runs that measured its earlier rows.
    meta["shapes"] = {**earlier.get("shapes", {}), **meta["shapes"]}
    meta["earlier_commands"] = [*earlier.get("earlier_commands", []), earlier["command"]] if earlier else []
    started = time.monotonic()
    for candidate in space.candidates():
        key = json.dumps(candidate.spec.to_vllm() if candidate.spec else None, sort_keys=True)
        if key in done:
            continue
        if time.monotonic() - started > args.budget_s:
            print(f"budget spent: {candidate.label} and the rest not started", flush=True)
            break
        spec = candidate.spec
        t0 = time.monotonic()
        try:
            measured = measure_config_at_loads(args.target, spec, workload, settings)
        except Exception as exc:  # noqa: BLE001 - one failed config must not lose the others
            print(f"{candidate.label}: FAILED {str(exc)[:400]}", flush=True)
            rows.append({"label": candidate.label, "config": json.loads(key), "load": None, "failed": str(exc)[:2000]})
            write(args.out_dir, meta, rows, space, loads, args.tables)
            continue
        meta["vllm_version"] = measured[0].server.vllm_version
        for m in measured:
            rows.append(row_of(candidate, m, measured[0].server.startup_s))
            r = rows[-1]
            print(f"{candidate.label:>40} {m.load:>15}: {sum(r['runs']) / len(r['runs']):8.1f} tok/s "
                  f"runs {[round(x) for x in r['runs']]} TPOT p50 {1e3 * (r['tpot_p50_s'] or 0):.2f} ms "
                  f"AL {r['mean_acceptance_length'] or 1:.2f}", flush=True)
        print(f"    start {measured[0].server.startup_s:.0f} s, trial {time.monotonic() - t0:.0f} s", flush=True)
        write(args.out_dir, meta, rows, space, loads, args.tables)


if __name__ == "__main__":
    main()
