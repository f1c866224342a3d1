"""The tuner's figures against ``vllm bench serve`` on a GPU: same server, same requests, per load.

For each config (the baseline and each ``--config NAME=SPEC_JSON``) one server is started
(tuner.engine.VllmServer, as a trial starts it, with ``--synthetic-acceptance`` applied to the
speculative config). At each concurrency the first requests of the workload (``--requests``
per load) are exported as vLLM's custom dataset and measured in turn by vLLM's own benchmark
client and by the tuner's measurement path (``agreement.run_vllm_bench`` and
``agreement.run_tuner``: ``tuner.measure.trial.measure_on_server``, what every trial does on its server),
``--rounds`` times each, alternating. The output: every run's tokens/s, each tool's ratio to the
baseline at each load and the config each tool's runs would make the answer there (the product's
rule, ``tuner.decide.answer.choose``), in ``--out`` (JSON, resumable: configs already in it are
not measured again) and as a table.

    python3 benchmarks/gpu_agreement.py --model /root/models/target \\
        --server-cmd 'python3 -m vllm.entrypoints.cli.main serve {model}' \\
        --server-arg=--load-format=dummy --synthetic-acceptance 0.74,0.54,0.41,0.31,0.23,0.17,0.13,0.10 \\
        --config 'eagle3 k=2={"method": "eagle3", "model": "/root/models/eagle3-8b", "num_speculative_tokens": 2}' \\
        --concurrency 1,8,32 --requests 1=16,8=64,32=192 --out gpu-agreement.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import agreement  # noqa: E402  (benchmarks/agreement.py: the CPU build's side-by-side check)

from tuner.engine import ServerOptions, SpecConfig, VllmServer  # noqa: E402
from tuner.replay import LoadSpec, replay  # noqa: E402
from tuner.decide.answer import DEFAULT_NOISE, choose  # noqa: E402
from tuner.decide.stats import relative_precision, repeat_stats  # noqa: E402
from tuner.store import TrialRow  # noqa: E402
from tuner.measure.trial import MeasureSettings, NoProgress, warm_up_until_steady  # noqa: E402
from tuner.workload import Request, Workload, load_workload  # noqa: E402

WARMUP_UNTIL_STEADY = False  # --warmup-until-steady
TOOLS = ("vllm", "tuner")  # --tools: also "tuner-vllm-body" and "vllm-token-ids"


@contextlib.contextmanager
def request_body_as(tool: str):
    """For "tuner-vllm-body", the tuner's client sends the body vllm bench serve sends (no
    return_token_ids; repetition_penalty 1.0 and logprobs null written out): does the body
    explain a difference?"""
    from tuner.replay import client

    original = client.request_body
    if tool == "tuner-vllm-body":
        def as_vllm(*a, **kw):
            path, body = original(*a, **kw)
            body.pop("return_token_ids", None)
            body.update({"repetition_penalty": 1.0, "logprobs": None})
            return path, body
        client.request_body = as_vllm
    try:
        yield
    finally:
        client.request_body = original
RATIO_TOLERANCE = 0.05  # the two tools' ratios to the baseline, relative
REPEAT_TOLERANCE = 0.03  # each tool's own runs of one config at one load


def distinct_copies(requests: list[Request], n: int) -> list[Request]:
    """``n`` requests: the workload's, then copies whose prompts start with a line of their own,
    so that no copy is served from the prefix cache of another."""
    out = []
    for i in range(n):
        r = requests[i % len(requests)]
        copy = i // len(requests)
        prompt = r.prompt if copy == 0 else f"# pass {copy + 1}\n{r.prompt}"
        out.append(replace(r, prompt=prompt, id=f"{r.id}-{copy}", arrival_s=None))
    return out


def measure_load(server: VllmServer, model: str, requests: list[Request], concurrency: int, spec: SpecConfig | None,
                 rounds: int, warmup: int, folder: Path) -> dict[str, list]:
    """tokens/s of each tool's runs at one load (TOOLS in order in odd rounds, reversed in even
    ones), and under "details" every run's client and server TTFT/TPOT and acceptance length."""
    folder.mkdir(parents=True, exist_ok=True)
    dataset = folder / "dataset.jsonl"
    agreement.write_dataset(requests, dataset)
    # The first pass over new batch shapes is slower on either tool: once, unmeasured. With
    # --warmup-until-steady, the tuner's own warm-up (tuner.measure.trial.warm_up_until_steady): the
    # load's requests until their tokens/s stops rising (a fresh server climbed for up to a minute).
    load = LoadSpec("concurrency", concurrency)
    if WARMUP_UNTIL_STEADY:
        seen = warm_up_until_steady(server, model, Workload(folder, "agreement", tuple(requests)), load,
                                    MeasureSettings(load=load, warmup_until_steady=True), NoProgress())
        print(f"  c{concurrency} warm-up: {', '.join(f'{v:.0f}' for v in seen)} tok/s", flush=True)
    else:
        replay(server.base_url, model, requests[: max(concurrency * 2, 8)], load)
    figures: dict[str, list[float]] = {tool: [] for tool in TOOLS}
    details = []  # per run: what the server itself saw (vLLM's histograms) and the acceptance
    for round_ in range(1, rounds + 1):
        for tool in (TOOLS if round_ % 2 else TOOLS[::-1]):
            name = f"{tool}-c{concurrency}-{round_}"
            # Every run starts from an empty prefix cache, as each of the tuner's replays does:
            # otherwise only the first run after the warm-up prefills its prompts in full.
            agreement.reset_prefix_cache(server.base_url)
            if tool.startswith("vllm"):
                argv = agreement.vllm_bench_argv(server.base_url, model, dataset, requests, concurrency, warmup,
                                                 folder, name)
                if tool == "vllm-token-ids":
                    argv += ["--extra-body", json.dumps({"return_token_ids": True})]
                result, window = agreement.run_vllm_bench(argv, folder / f"{name}.txt", server)
                # vLLM 0.26.0's result has no per-request latencies: only its totals are read.
                tokens_per_s, failed = result["output_throughput"], result["failed"]
                client = {"ttft_ms": result["mean_ttft_ms"], "tpot_ms": result["mean_tpot_ms"],
                          "acceptance_length": result.get("spec_decode_acceptance_length")}
                server_side = window.server
            else:
                with request_body_as(tool):
                    run = agreement.run_tuner(server, model, requests, concurrency, warmup, spec, round_,
                                              folder / f"{name}.json")
                tokens_per_s, failed = run.output_tokens_per_s, run.failed
                client = {"ttft_ms": run.mean_ttft_ms, "tpot_ms": run.mean_tpot_ms,
                          "acceptance_length": run.acceptance_length}
                server_side = run.server
            figures[tool].append(tokens_per_s)
            details.append({"tool": tool, "round": round_, "tokens_per_s": round(tokens_per_s, 1),
                            **{f"client {key}": value and round(value, 3) for key, value in client.items()},
                            **{f"server {key}": round(value, 3) for key, value in server_side.items()}})
            print(f"  c{concurrency} {tool} #{round_}: {tokens_per_s:.0f} tok/s, failed {failed}; "
                  f"client TTFT/TPOT {client['ttft_ms']:.1f}/{client['tpot_ms']:.2f} ms, server "
                  f"{server_side.get('ttft_ms', float('nan')):.1f}/{server_side.get('tpot_ms', float('nan')):.2f} ms, "
                  f"acceptance length {client['acceptance_length'] or 0:.2f}", flush=True)
    figures["details"] = details
    return figures


def summarize_ratios(record: dict) -> list[dict]:
    """Per load and config: each tool's mean tokens/s, own spread and ratio to the baseline."""
    rows = []
    base = record["configs"]["baseline"]["loads"]
    for name, config in record["configs"].items():
        for load, tools in config["loads"].items():
            row = {"config": name, "load": load}
            for tool, runs in tools.items():
                if tool == "details" or tool not in base[load]:
                    continue
                mean = statistics.fmean(runs)
                row[f"{tool} tok/s"] = round(mean, 1)
                row[f"{tool} spread"] = round((max(runs) - min(runs)) / mean, 4)
                row[f"{tool} ratio"] = round(mean / statistics.fmean(base[load][tool]), 4)
            row["ratio difference"] = round(row["tuner ratio"] / row["vllm ratio"] - 1, 4)
            rows.append(row)
    return rows


def as_trial_rows(record: dict, load: str, tool: str) -> list[TrialRow]:
    """One tool's runs of every config at one load as the rows a study stores for its trials
    (tokens/s: the median, MAD and 95 % interval of the runs, as ``ResultStore.complete_trial``
    keeps them), so that the product's own rule chooses among them. No latency targets, and no
    greedy output check: this script does not compare outputs."""
    rows = []
    for number, (name, config) in enumerate(record["configs"].items()):
        runs = config["loads"].get(load, {}).get(tool)
        if not runs:
            continue
        stats, precision = repeat_stats(runs), relative_precision(runs)
        rows.append(TrialRow(
            study_name="gpu agreement", model=record["model"], workload_type="agreement", load=load,
            optuna_trial_number=number, config=config["spec"], label=name, status="complete",
            failure_cause=None, server_log_path=None, tokens_per_s=stats.median, tpot_p50_s=None,
            ttft_p50_s=None, acceptance_rate=None, mean_acceptance_length=None, per_position=None,
            finished_at=None, vllm_version=None, host="", server_args=[], repeats=stats.n,
            tokens_per_s_mad=stats.mad, tokens_per_s_ci=(stats.ci_low, stats.ci_high),
            tokens_per_s_precision=precision if math.isfinite(precision) else None, replays=tuple(runs)))
    return rows


def choices(record: dict, noise: float = DEFAULT_NOISE) -> dict[str, dict[str, str]]:
    """Per load, the config each tool's runs would make the answer, by the product's rule
    (``tuner.decide.answer.choose``: speculation must beat the baseline by more than ``noise``
    plus the runs' spread, configs tied by the run noise go to the smaller k), not the highest
    mean. "undecided: ..." is added where the answer leaves contenders undecided."""
    out: dict[str, dict[str, str]] = {}
    loads = {load for config in record["configs"].values() for load in config["loads"]}
    for load in sorted(loads, key=int):
        out[load] = {}
        for tool in ("vllm", "tuner"):
            rows = as_trial_rows(record, load, tool)
            if not any(r.config is None for r in rows):
                continue  # no baseline run by this tool at this load: no answer
            answer = choose(rows, noise)
            chosen = answer.winner.label if answer.winner is not None else "none"
            if answer.undecided:
                chosen += f" (undecided: {', '.join(r.label for r in answer.undecided)})"
            out[load][tool] = chosen
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--workload", default="workloads/code.jsonl")
    parser.add_argument("--server-cmd", default=None)
    parser.add_argument("--server-arg", action="append", default=[])
    parser.add_argument("--synthetic-acceptance", default=None)
    parser.add_argument("--config", action="append", default=[], metavar="NAME=SPEC_JSON")
    parser.add_argument("--concurrency", default="1,8,32")
    parser.add_argument("--requests", default="1=16,8=64,32=192", help="requests per load: C=N,...")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=4)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--noise", type=float, default=DEFAULT_NOISE,
                        help="the study's --noise, with which answer.choose picks each load's answer (default %(default)s)")
    parser.add_argument("--log-dir", type=Path, default=Path("gpu-agreement-logs"))
    parser.add_argument("--deadline-s", type=float, default=None, help="start no config after this many seconds")
    parser.add_argument("--without-token-ids", action="store_true",
                        help="the tuner's replays do not ask for return_token_ids (which vllm bench serve "
                             "never sends): does asking cost the server time?")
    parser.add_argument("--skip-baseline", action="store_true", help="only the --config servers (no ratios)")
    parser.add_argument("--tools", default="vllm,tuner",
                        help="the clients measured in turn: vllm, tuner, tuner-vllm-body, vllm-token-ids")
    parser.add_argument("--warmup-until-steady", action="store_true",
                        help="warm each load up until its tokens/s stops rising before either tool measures")
    args = parser.parse_args()
    global WARMUP_UNTIL_STEADY, TOOLS
    WARMUP_UNTIL_STEADY = args.warmup_until_steady
    TOOLS = tuple(args.tools.split(","))
    if args.without_token_ids:
        from tuner.replay import client

        def without_token_ids(*a, _body=client.request_body, **kw):
            path, body = _body(*a, **kw)
            body.pop("return_token_ids", None)
            return path, body

        client.request_body = without_token_ids
    started = time.monotonic()
    loads = [int(c) for c in args.concurrency.split(",")]
    per_load = {int(c): int(n) for c, n in (x.split("=") for x in args.requests.split(","))}
    source = [r for r in load_workload(args.workload).requests]
    # NAME=SPEC_JSON, where NAME may hold "=" itself ("eagle3 k=2"): the JSON starts at "={".
    configs = {**({} if args.skip_baseline else {"baseline": None}), **{name: SpecConfig.from_json("{" + spec) for name, spec in
                                    (c.split("={", 1) for c in args.config)}}
    record = json.loads(args.out.read_text()) if args.out.exists() else {
        "model": args.model, "workload": args.workload, "requests": per_load, "rounds": args.rounds,
        "warmup": args.warmup, "synthetic_acceptance": args.synthetic_acceptance,
        "without_token_ids": args.without_token_ids, "warmup_until_steady": args.warmup_until_steady,
        "configs": {}}
    rates = tuple(float(x) for x in args.synthetic_acceptance.split(",")) if args.synthetic_acceptance else None
    for name, spec in configs.items():
        if name in record["configs"]:
            continue
        if args.deadline_s and time.monotonic() - started > args.deadline_s:
            print(f"deadline: {name} left for the next call", flush=True)
            break
        options = ServerOptions(server_cmd=args.server_cmd, server_args=args.server_arg, log_dir=args.log_dir,
                                synthetic_acceptance=rates if spec else None)
        print(f"{name}: starting", flush=True)
        with VllmServer(args.model, spec, options) as server:
            entry = {"spec": spec.to_vllm() if spec else None, "startup_s": round(server.startup_s or 0, 1),
                     "command": server.command(), "loads": {}}
            print(f"{name}: ready in {server.startup_s:.0f} s", flush=True)
            for c in loads:
                requests = distinct_copies(source, per_load[c])
                entry["loads"][str(c)] = measure_load(server, args.model, requests, c, spec,
                                                      args.rounds, args.warmup,
                                                      args.out.parent / "gpu-agreement-runs" / name.replace(" ", "_"))
        record["configs"][name] = entry
        args.out.write_text(json.dumps(record, indent=1))
    if "baseline" in record["configs"]:
        record["rows"] = summarize_ratios(record)
        record["choices"] = choices(record, args.noise)
        args.out.write_text(json.dumps(record, indent=1))
        print(f"{'config':<14} {'load':>4} {'vllm tok/s':>10} {'tuner tok/s':>11} {'vllm x':>7} {'tuner x':>8} "
              f"{'diff':>7} {'spreads v/t':>12}")
        for r in record["rows"]:
            print(f"{r['config']:<14} {r['load']:>4} {r['vllm tok/s']:>10.0f} {r['tuner tok/s']:>11.0f} "
                  f"{r['vllm ratio']:>7.3f} {r['tuner ratio']:>8.3f} {r['ratio difference']:>+7.1%} "
                  f"{r['vllm spread']:>5.1%}/{r['tuner spread']:.1%}")
        print(f"the answer per load by the product's rule (answer.choose, noise {args.noise:.0%}):",
              record["choices"])
    print(f"took {time.monotonic() - started:.0f} s on {os.uname().nodename}")


if __name__ == "__main__":
    main()
