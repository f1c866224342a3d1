"""What vLLM's per-request acceptance counts cost: the same speculative config measured through the
tuner's own path (tuner.measure.trial.measure_config) with and without
``--per-request-spec-decode-metrics summary``, alternating, on fresh servers.

    VLLM_CPU_KVCACHE_SPACE=1 .venv/bin/python benchmarks/per_request_flag.py --rounds 2

Prints per server: start seconds, replay tokens/s and whether vLLM's own counts came back; then
the medians side by side and their ratio. The requests always ask for their token ids (the
tuner's client does), so this isolates the server flag.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from dataclasses import replace
from pathlib import Path

from tuner.engine import ServerOptions, SpecConfig
from tuner.measure.trial import MeasureSettings, measure_config
from tuner.replay import LoadSpec
from tuner.workload import load_workload

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / ".models" / "target"))
    parser.add_argument("--draft", default=str(ROOT / ".models" / "eagle3"))
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="per-request-flag-"))
    workload_path = folder / "code.jsonl"
    lines = (ROOT / "workloads" / "code.jsonl").read_text().splitlines()[:args.requests]
    workload_path.write_text("".join(json.dumps({**json.loads(x), "max_tokens": 48}) + "\n" for x in lines))
    workload = load_workload(workload_path)
    spec = SpecConfig("eagle3", 3, draft_model=args.draft)
    base = MeasureSettings(load=LoadSpec(concurrency=2), warmup=2, server=ServerOptions(
        log_dir=folder / "logs", server_args=["--enforce-eager", "--max-model-len=1024"]))
    seen: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    for round_ in range(args.rounds):
        for flag in (True, False) if round_ % 2 == 0 else (False, True):
            settings = replace(base, server=replace(base.server, per_request_acceptance=flag))
            m = measure_config(args.model, spec, workload, settings)
            counted = m.median_run.request_acceptance.total.server_steps is not None
            seen[flag].append((m.server.startup_s, m.tokens_per_s.median))
            print(f"round {round_} flag {'on ' if flag else 'off'}: start {m.server.startup_s:.1f} s, "
                  f"{m.tokens_per_s.median:.1f} tok/s, vLLM's own counts {'back' if counted else 'absent'}",
                  flush=True)
    on, off = ({k: statistics.median(x[i] for x in seen[flag]) for i, k in enumerate(("start", "tps"))}
               for flag in (True, False))
    print(f"| | start s | tok/s |\n| --- | ---: | ---: |\n| flag on | {on['start']:.1f} | {on['tps']:.1f} |\n"
          f"| flag off | {off['start']:.1f} | {off['tps']:.1f} |\n"
          f"| on / off | {on['start'] / off['start']:.2f} | {on['tps'] / off['tps']:.2f} |")


if __name__ == "__main__":
    main()
