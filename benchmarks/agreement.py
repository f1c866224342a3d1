"""Does the tuner measure what ``vllm bench serve`` measures?

One real vLLM server (tuner.engine.VllmServer, always stopped on exit) is measured in turn by
vLLM's own benchmark client and by the tuner's measurement path, on the same prompts, the same
output lengths (each request's ``output_tokens``, generated in full with ``ignore_eos``), the same
sampling and the same concurrency. The runs alternate (vllm, tuner, vllm, tuner, ...; or
``--order abba``) so the machine's noise shows. Before the first round the whole workload is
replayed once, unmeasured (``--no-prime`` skips it): on the CPU build the first pass over the
prompts is slower, and would otherwise fall on the first run only. Nothing is reset between runs
unless ``--reset-prefix-cache`` is given (``POST /reset_prefix_cache``, served because VllmServer
starts vLLM with ``VLLM_SERVER_DEV_MODE=1``).

- vLLM: ``vllm.benchmarks.serve.main`` called in this process (the ``vllm`` console script does not
  start with the CPU build), custom JSONL dataset in workload order (``--disable-shuffle``), the
  prompts as they are (``--skip-chat-template``), per-request lengths (``--custom-output-len -1``),
  ``--num-warmups`` warm-up requests, acceptance from its own ``/metrics`` deltas.
- tuner: ``tuner.measure.trial.measure_on_server`` on the running server, the function every trial calls
  once its server is up: its warm-up, one replay with /metrics read around it (and once more
  where the replay is marked for a reason another can clear, as in a trial), and for the
  baseline the greedy reference after the measured replay.

The table compares output tokens/s, mean TPOT, mean TTFT, acceptance rate and mean acceptance
length, and checks the targets: tokens/s and TPOT within 5 %, acceptance rate within 0.01
absolute and mean acceptance length within 1 %. Exit code 0 when every target is met, 1 if not.
Below the targets, for finding out why figures differ: medians, requests whose output came in one
burst, vLLM's own server-side latencies over the same window, token counts, whether every request
generated the same text, and the CPU taken by the client, each server process and the rest.

    .venv/bin/python benchmarks/agreement.py                    # ngram k=3 on workloads/code.jsonl
    .venv/bin/python benchmarks/agreement.py --spec \\
        '{"method": "draft_model", "model": ".models/draft", "num_speculative_tokens": 3}'
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

# The caller (Makefile) normally sets these; defaults for a direct run. Set before vLLM is imported
# here and before the server starts (it inherits this environment).
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a file from the repository: `tuner` is importable either way

import httpx  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from tuner.engine import ServerOptions, SpecConfig, VllmServer  # noqa: E402
from tuner.errors import TunerError  # noqa: E402
from tuner.replay import LoadSpec, replay  # noqa: E402
from tuner.measure.trial import MeasureSettings, NoProgress, measure_on_server  # noqa: E402
from tuner.workload import Request, Workload, load_workload  # noqa: E402

DEFAULT_SPEC = {"method": "ngram", "num_speculative_tokens": 3,
                "prompt_lookup_min": 2, "prompt_lookup_max": 4}
DEFAULT_SERVER_ARGS = ["--enforce-eager", "--max-model-len=1024"]
SPEED_TOLERANCE = 0.05  # tokens/s and TPOT: tuner/vllm within 5 %
RATE_TOLERANCE = 0.01  # acceptance rate: absolute difference
LENGTH_TOLERANCE = 0.01  # mean acceptance length: relative difference

console = Console(width=max(Console().width, 150))  # wider when piped; see results_table


@dataclass
class RunFigures:
    """What one run of one tool measured; times in milliseconds, acceptance None without drafts."""

    tool: str  # "vllm" or "tuner"
    round: int
    duration_s: float
    completed: int
    failed: int
    output_tokens: int
    output_tokens_per_s: float
    mean_tpot_ms: float
    mean_ttft_ms: float
    mean_e2e_ms: float
    acceptance_rate: float | None
    acceptance_length: float | None
    drafts: int | None
    draft_tokens: int | None
    accepted_tokens: int | None
    per_position: list[float] | None
    client_cpu_s: float = float("nan")  # CPU time of this process over the run
    cpu_shares: dict[str, float] = field(default_factory=dict)  # % of one core over the run
    server: dict[str, float] = field(default_factory=dict)  # vLLM's own figures, same window
    median_tpot_ms: float = float("nan")
    median_ttft_ms: float = float("nan")
    stalled: int = 0  # requests whose first token came after half their e2e: output in one burst
    prompt_tokens: int = 0  # from the server's usage reports
    text_digests: list[str | None] = field(default_factory=list)  # per request, workload order
    same_text: int = 0  # requests whose generated text equals the first vllm run's


# ---------------------------------------------------------------- inputs


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", default="workloads/code.jsonl",
                        help="JSONL workload with completions prompts and output_tokens")
    parser.add_argument("--model", default=".models/target", help="target model (path or name)")
    parser.add_argument("--spec", default=json.dumps(DEFAULT_SPEC),
                        help="speculative config JSON, or 'none' for no speculation "
                             "(default: %(default)s)")
    parser.add_argument("--concurrency", type=int, default=2,
                        help="closed-loop clients (default 2)")
    parser.add_argument("--requests", type=int, default=None,
                        help="measure only the first N requests of the workload (default all)")
    parser.add_argument("--warmup", type=int, default=MeasureSettings().warmup,
                        help="warm-up requests before each run, excluded (default: the tuner's)")
    parser.add_argument("--rounds", type=int, default=2,
                        help="alternating vllm/tuner rounds on the one server (default 2)")
    parser.add_argument("--order", choices=("abab", "abba"), default="abab",
                        help="abab: vllm first in every round (default); abba: vllm first in odd "
                             "rounds, the tuner first in even ones, so a position effect cancels")
    parser.add_argument("--server-arg", action="append", default=None, metavar="ARG",
                        help="server argument, repeatable, as --server-arg=--flag (default: "
                             f"{' '.join(DEFAULT_SERVER_ARGS)})")
    parser.add_argument("--out-dir", default=None,
                        help="where the dataset, both tools' results and vLLM's printout are kept "
                             "(default .tuner/agreement/<time>)")
    parser.add_argument("--no-prime", dest="prime", action="store_false",
                        help="skip the unmeasured pass of the whole workload before round 1 (the "
                             "first pass over new prompt lengths is slower; without it the first "
                             "run, vLLM's with --order abab, pays for it)")
    parser.add_argument("--reset-prefix-cache", action="store_true",
                        help="POST /reset_prefix_cache before each run (needs the server's dev "
                             "mode, which VllmServer turns on); default: reset nothing")
    parser.add_argument("--log-dir", default=".tuner/logs", help="server log folder")
    args = parser.parse_args(argv)
    if args.concurrency < 1 or args.rounds < 1 or args.warmup < 0:
        parser.error("--concurrency and --rounds must be >= 1, --warmup >= 0")
    return args


def load_requests(path: str, limit: int | None) -> list[Request]:
    """The workload's requests, checked for what both tools can send identically."""
    requests = list(load_workload(path).requests)[:limit]
    if any(r.is_chat for r in requests):
        raise TunerError(f"{path}: chat requests ('messages') cannot be given to vllm bench's "
                         "custom dataset as they are; use a workload of completions prompts")
    if any(r.output_tokens is None for r in requests):
        raise TunerError(f"{path}: every request needs 'output_tokens' (replayed with ignore_eos)")
    sampling = {(r.temperature, r.top_p, r.seed) for r in requests}
    if len(sampling) != 1:
        raise TunerError(f"{path}: vllm bench sends one set of sampling parameters; the "
                         "workload's requests differ in (temperature, top_p, seed): "
                         f"{sorted(map(str, sampling))}")
    return requests


def parse_spec(text: str) -> SpecConfig | None:
    return None if text.strip().lower() == "none" else SpecConfig.from_json(text)


def write_dataset(requests: list[Request], path: Path) -> None:
    """vLLM's custom dataset: one {"prompt", "output_tokens"} object per line, workload order."""
    with path.open("w", encoding="utf-8") as out:
        for r in requests:
            out.write(json.dumps({"prompt": r.prompt, "output_tokens": r.output_tokens}) + "\n")


SERVER_HISTOGRAMS = {  # vLLM's own per-request latencies, measured inside the API server
    "ttft_ms": "vllm:time_to_first_token_seconds",
    "tpot_ms": "vllm:request_time_per_output_token_seconds",
    "e2e_ms": "vllm:e2e_request_latency_seconds",
}
CACHED_PROMPT_TOKENS = "vllm:prompt_tokens_cached_total"


def server_totals(base_url: str) -> dict[str, float]:
    """Running sums and counts of vLLM's latency histograms and its prefix-cache hits."""
    totals: dict[str, float] = defaultdict(float)
    text = httpx.get(f"{base_url}/metrics", timeout=10.0).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            for key, name in SERVER_HISTOGRAMS.items():
                if sample.name in (f"{name}_sum", f"{name}_count"):
                    totals[f"{key}{sample.name[len(name):]}"] += sample.value
            if sample.name == CACHED_PROMPT_TOKENS:
                totals["cached prompt tokens"] += sample.value
    return totals


class RunWindow:
    """What one measured run cost and what the server saw over it (warm-up excluded).

    CPU from /proc, in % of one core: this process (the client), each of the server's processes
    (API server, engine core, worker) and everything else on the machine ("others"). From the
    server's /metrics: vLLM's own mean TTFT, TPOT and e2e, and prompt tokens served from the
    prefix cache.
    """

    ROLES = ("client", "api server", "engine core", "worker", "others")

    def __init__(self, server_pgid: int, base_url: str):
        self.pgid = server_pgid
        self.base_url = base_url
        self.started = False
        self.client_s = float("nan")
        self.shares: dict[str, float] = {}
        self.server: dict[str, float] = {}

    def _server_cpu(self) -> dict[str, float]:
        """Seconds of CPU so far: each server role, and "busy" for the whole machine."""
        totals = dict.fromkeys(self.ROLES[1:-1], 0.0)
        tick = os.sysconf("SC_CLK_TCK")
        with contextlib.suppress(OSError, ValueError):
            # cpu  user nice system idle iowait irq softirq steal ...: busy = all but idle, iowait
            jiffies = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:9]]
            totals["busy"] = (sum(jiffies[:3]) + sum(jiffies[5:8])) / tick
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, ValueError):
                text = stat.read_text()
                comm, rest = text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 2:]
                fields = rest.split()  # state ppid pgrp ... utime (11) stime (12)
                if int(fields[2]) != self.pgid:
                    continue
                role = ("api server" if int(stat.parent.name) == self.pgid
                        else "engine core" if comm.startswith("VLLM::Engine")
                        else "worker" if comm.startswith("VLLM::Worker") else None)
                if role:
                    totals[role] += (int(fields[11]) + int(fields[12])) / tick
        return totals

    def start(self) -> None:
        self.started = True
        self._totals = server_totals(self.base_url)
        self._wall, self._client, self._server = (time.perf_counter(), time.process_time(),
                                                  self._server_cpu())

    def stop(self) -> None:
        wall = time.perf_counter() - self._wall
        self.client_s = time.process_time() - self._client
        server = self._server_cpu()
        self.shares = {"client": 100 * self.client_s / wall,
                       **{role: 100 * (server[role] - self._server[role]) / wall
                          for role in self.ROLES[1:-1]}}
        busy = 100 * (server.get("busy", 0.0) - self._server.get("busy", 0.0)) / wall
        self.shares["others"] = max(0.0, busy - sum(self.shares.values()))
        delta = {k: v - self._totals.get(k, 0.0) for k, v in server_totals(self.base_url).items()}
        self.server = {key: 1000 * delta[f"{key}_sum"] / delta[f"{key}_count"]
                       for key in SERVER_HISTOGRAMS if delta.get(f"{key}_count")}
        self.server["cached prompt tokens"] = delta.get("cached prompt tokens", 0.0)

    def __enter__(self) -> RunWindow:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def reset_prefix_cache(base_url: str) -> None:
    """Start a run with an empty prefix cache (served only with VLLM_SERVER_DEV_MODE=1)."""
    try:
        httpx.post(f"{base_url}/reset_prefix_cache", timeout=30.0).raise_for_status()
    except httpx.HTTPError as exc:
        raise TunerError(f"could not reset the prefix cache ({exc}); the server needs "
                         "VLLM_SERVER_DEV_MODE=1") from None


# ---------------------------------------------------------------- vLLM's benchmark client


def vllm_bench_argv(base_url: str, model: str, dataset: Path, requests: list[Request],
                    concurrency: int, warmup: int, result_dir: Path, name: str) -> list[str]:
    first = requests[0]
    argv = [
        "--backend", "openai", "--base-url", base_url, "--endpoint", "/v1/completions",
        "--model", model,
        "--dataset-name", "custom", "--dataset-path", str(dataset),
        "--custom-output-len", "-1",  # -1: each request's own output_tokens
        "--skip-chat-template", "--disable-shuffle", "--num-prompts", str(len(requests)),
        "--max-concurrency", str(concurrency), "--request-rate", "inf",
        "--ignore-eos", "--num-warmups", str(warmup),
        "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99",
        "--save-result", "--save-detailed", "--result-dir", str(result_dir),
        "--result-filename", f"{name}.json", "--label", name, "--disable-tqdm",
    ]
    if first.temperature is not None:
        argv += ["--temperature", str(first.temperature)]
    if first.top_p is not None:
        argv += ["--top-p", str(first.top_p)]
    if first.seed is not None:
        argv += ["--extra-body", json.dumps({"seed": first.seed})]
    return argv


def check_vllm_bench() -> None:
    """Fail before the server starts if vllm bench or its custom dataset's pandas is missing."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        raise TunerError("vLLM is not installed in this Python; run it with .venv/bin/python")
    if importlib.util.find_spec("pandas") is None:
        raise TunerError("vllm bench's custom dataset reads JSONL with pandas (vLLM's [bench] "
                         "extra), which is not installed: .venv/bin/pip install pandas")


def run_vllm_bench(argv: list[str], printout: Path, server: VllmServer
                   ) -> tuple[dict[str, Any], RunWindow]:
    """``vllm bench serve`` from Python: its result dict and the RunWindow of its run.

    Its own printout goes to a file. ``benchmark()`` scrapes /metrics twice, right after its
    warm-up and right after its run (for its acceptance figures); the window opens and closes at
    those two calls, so it covers the measured requests exactly as the tuner's does.
    """
    from vllm.benchmarks import serve
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser()
    serve.add_cli_args(parser)
    args = parser.parse_args(argv)
    assert server.process is not None
    window = RunWindow(server.process.pid, server.base_url)  # the server leads its process group
    fetch = serve.fetch_spec_decode_metrics

    async def fetch_and_mark(*a: Any, **kw: Any) -> Any:
        if window.started:
            window.stop()
        else:
            window.start()
        return await fetch(*a, **kw)

    serve.fetch_spec_decode_metrics = fetch_and_mark  # benchmark() looks it up at call time
    try:
        with printout.open("w", encoding="utf-8") as out, contextlib.redirect_stdout(out):
            result = serve.main(args)
    finally:
        serve.fetch_spec_decode_metrics = fetch
    return result, window


def vllm_figures(result: dict[str, Any], round_: int, window: RunWindow) -> RunFigures:
    has_spec = "spec_decode_acceptance_rate" in result
    return RunFigures(
        tool="vllm", round=round_, duration_s=result["duration"],
        completed=result["completed"], failed=result["failed"],
        output_tokens=result["total_output_tokens"],
        output_tokens_per_s=result["output_throughput"],
        mean_tpot_ms=result["mean_tpot_ms"], mean_ttft_ms=result["mean_ttft_ms"],
        mean_e2e_ms=result["mean_e2el_ms"],
        # vLLM reports the rate in percent
        acceptance_rate=result["spec_decode_acceptance_rate"] / 100 if has_spec else None,
        acceptance_length=result.get("spec_decode_acceptance_length"),
        drafts=result.get("spec_decode_num_drafts"),
        draft_tokens=result.get("spec_decode_draft_tokens"),
        accepted_tokens=result.get("spec_decode_accepted_tokens"),
        per_position=result.get("spec_decode_per_position_acceptance_rates"),
        client_cpu_s=window.client_s, cpu_shares=window.shares, server=window.server,
        median_tpot_ms=result["median_tpot_ms"], median_ttft_ms=result["median_ttft_ms"],
        stalled=count_stalled(zip(result["ttfts"], result["latencies"])),
        prompt_tokens=result["total_input_tokens"],
        text_digests=[text_digest(text) for text in result["generated_texts"]],
    )


def text_digest(text: str) -> str:
    """The digest the tuner's client keeps of each generated text (RequestResult.text_digest)."""
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def count_stalled(ttft_e2e: Any) -> int:
    """Requests that got their first token after half their e2e time: the stream stood still and
    then came in one burst (a scheduling stall of the client or the server), not a slow decode."""
    return sum(1 for ttft, e2e in ttft_e2e if ttft and e2e and ttft >= 0.5 * e2e)


# ---------------------------------------------------------------- the tuner's path


class TunerWindow(NoProgress):
    """The Progress the tuner's path is given here: a RunWindow opened as each measured replay
    starts (``_replay_once`` says "replay ...") and closed at the next step the trial takes
    (a replay once more, the baseline's greedy reference) or when it returns. It covers the
    replay the trial keeps, as vLLM's window covers vLLM's run; warm-up excluded."""

    def __init__(self, server: VllmServer):
        assert server.process is not None
        self.pgid, self.base_url = server.process.pid, server.base_url  # the server leads its group
        self.open: RunWindow | None = None
        self.closed: RunWindow | None = None

    def close(self) -> None:
        if self.open is not None:
            self.open.stop()
            self.closed, self.open = self.open, None

    def phase(self, description: str) -> None:
        self.close()

    def start_replay(self, description: str, total: int) -> None:
        self.close()
        if description.startswith("replay"):
            self.open = RunWindow(self.pgid, self.base_url)
            self.open.start()


def run_tuner(server: VllmServer, model: str, requests: list[Request], concurrency: int,
              warmup: int, spec: SpecConfig | None, round_: int, save_to: Path) -> RunFigures:
    """The tuner's own trial on this running server: ``tuner.measure.trial.measure_on_server``, the
    function every trial calls once its server is up (warm-up, replay with /metrics read
    around it, the baseline's greedy reference after it), at one load, one replay. No default
    seeds are added (``sampling_seed=None``): both tools send the workload's requests as they are."""
    settings = MeasureSettings(load=LoadSpec("concurrency", concurrency), warmup=warmup, sampling_seed=None)
    workload = Workload(save_to.parent / "dataset.jsonl", "agreement", tuple(requests))
    window = TunerWindow(server)
    try:
        (measurement,) = measure_on_server(server, model, spec, workload, settings, window)
    finally:
        window.close()
    run = measurement.runs[-1]
    summary, acceptance, results = run.summary, run.acceptance, run.requests
    save_to.write_text(json.dumps({
        "summary": asdict(summary), "acceptance": asdict(acceptance) if acceptance else None,
        "server_generation_tokens": run.server_generation_tokens, "marks": list(run.marks),
        "remeasured": list(run.remeasured), "requests": [asdict(r) for r in results],
    }, indent=1))
    ms = lambda p: p.mean * 1000 if p else float("nan")  # noqa: E731
    measured = window.closed  # the window of the replay kept (the last one opened)
    assert measured is not None
    return RunFigures(
        tool="tuner", round=round_, duration_s=summary.duration_s,
        completed=summary.completed, failed=summary.failed, output_tokens=summary.output_tokens,
        output_tokens_per_s=summary.output_tokens_per_s,
        mean_tpot_ms=ms(summary.tpot), mean_ttft_ms=ms(summary.ttft), mean_e2e_ms=ms(summary.e2e),
        acceptance_rate=acceptance.acceptance_rate if acceptance else None,
        acceptance_length=acceptance.mean_acceptance_length if acceptance else None,
        drafts=acceptance.drafts if acceptance else None,
        draft_tokens=acceptance.draft_tokens if acceptance else None,
        accepted_tokens=acceptance.accepted_tokens if acceptance else None,
        per_position=list(acceptance.per_position) if acceptance else None,
        client_cpu_s=measured.client_s, cpu_shares=measured.shares, server=measured.server,
        median_tpot_ms=summary.tpot.p50 * 1000 if summary.tpot else float("nan"),
        median_ttft_ms=summary.ttft.p50 * 1000 if summary.ttft else float("nan"),
        stalled=count_stalled((r.ttft_s, r.e2e_s) for r in results if r.ok),
        prompt_tokens=sum(r.prompt_tokens or 0 for r in results if r.ok),
        text_digests=[getattr(r, "text_digest", None) for r in results],
    )


# ---------------------------------------------------------------- comparison


@dataclass(frozen=True)
class Figure:
    """One compared figure: how to read it from a run, how to print it and its target."""

    label: str
    get: Callable[[RunFigures], float | None]
    fmt: str
    target: str  # "ratio" (|tuner/vllm - 1|), "abs" (|tuner - vllm|), "rel" (|diff| / vllm), ""
    tolerance: float = 0.0


FIGURES = [
    Figure("output tokens/s", lambda r: r.output_tokens_per_s, "{:.1f}", "ratio", SPEED_TOLERANCE),
    Figure("mean TPOT ms", lambda r: r.mean_tpot_ms, "{:.3f}", "ratio", SPEED_TOLERANCE),
    Figure("mean TTFT ms", lambda r: r.mean_ttft_ms, "{:.2f}", "ratio"),
    Figure("acceptance rate", lambda r: r.acceptance_rate, "{:.4f}", "abs", RATE_TOLERANCE),
    Figure("mean acceptance length", lambda r: r.acceptance_length, "{:.4f}", "rel",
           LENGTH_TOLERANCE),
]
INFO = [  # shown for context, no target
    Figure("median TPOT ms", lambda r: r.median_tpot_ms, "{:.3f}", "ratio"),
    Figure("median TTFT ms", lambda r: r.median_ttft_ms, "{:.2f}", "ratio"),
    Figure("stalled requests (TTFT >= e2e/2)", lambda r: r.stalled, "{:.0f}", ""),
    Figure("mean e2e ms", lambda r: r.mean_e2e_ms, "{:.2f}", "ratio"),
    Figure("server: mean TTFT ms", lambda r: r.server.get("ttft_ms"), "{:.2f}", "ratio"),
    Figure("server: mean TPOT ms", lambda r: r.server.get("tpot_ms"), "{:.3f}", "ratio"),
    Figure("server: mean e2e ms", lambda r: r.server.get("e2e_ms"), "{:.2f}", "ratio"),
    Figure("server: cached prompt tokens", lambda r: r.server.get("cached prompt tokens"),
           "{:.0f}", "ratio"),
    Figure("duration s", lambda r: r.duration_s, "{:.3f}", "ratio"),
    Figure("output tokens", lambda r: r.output_tokens, "{:.0f}", "ratio"),
    Figure("prompt tokens", lambda r: r.prompt_tokens, "{:.0f}", "ratio"),
    Figure("requests with vllm #1's text", lambda r: r.same_text, "{:.0f}", ""),
    Figure("completed / failed", lambda r: r.completed, "{:.0f}", ""),
    Figure("client CPU s", lambda r: r.client_cpu_s, "{:.2f}", "ratio"),
    Figure("CPU % client/API/engine/worker/others", lambda r: None, "", ""),
    Figure("drafts", lambda r: r.drafts, "{:.0f}", "ratio"),
    Figure("draft tokens", lambda r: r.draft_tokens, "{:.0f}", "ratio"),
    Figure("accepted tokens", lambda r: r.accepted_tokens, "{:.0f}", "ratio"),
]


def compare(figure: Figure, vllm: list[float], tuner: list[float]) -> tuple[str, str, str]:
    """(tuner vs vllm over the means of all rounds, per-round pairs, met?) as printed text."""
    if not figure.target:
        return "-", "-", ""
    if not vllm or not tuner:
        return "-", "-", "n/a"
    v, t = statistics.mean(vllm), statistics.mean(tuner)
    pairs = list(zip(vllm, tuner))
    if figure.target == "abs":
        text, rounds = f"{t - v:+.4f}", " ".join(f"{b - a:+.4f}" for a, b in pairs)
        off = abs(t - v)
    elif figure.target == "rel":
        text, rounds = f"{t - v:+.4f}", " ".join(f"{b - a:+.4f}" for a, b in pairs)
        off = abs(t - v) / v if v else float("inf")
    elif figure.target == "ratio":
        text = f"{t / v:.3f}x" if v else "-"
        rounds = " ".join(f"{b / a:.3f}" if a else "-" for a, b in pairs)
        off = abs(t / v - 1) if v else float("inf")
    else:
        raise ValueError(f"unknown target kind {figure.target!r}")
    if not figure.tolerance:
        return text, rounds, ""
    return text, rounds, "[green]yes[/]" if off <= figure.tolerance else "[red]NO[/]"


def target_text(figure: Figure) -> str:
    if not figure.tolerance:
        return ""
    if figure.target == "ratio":
        return f"±{figure.tolerance:.0%}"
    if figure.target == "abs":
        return f"±{figure.tolerance:g} abs"
    return f"±{figure.tolerance:.0%}"


def results_table(runs: list[RunFigures], title: str) -> tuple[Table, bool]:
    """The side-by-side table and whether every target was met."""
    table = Table(title=title, title_justify="left")
    table.add_column("figure")
    ordered = list(runs)  # in the order they ran
    for run in ordered:
        table.add_column(f"{run.tool} #{run.round}", justify="right")
    for name in ("tuner vs vllm", "per round", "target", "met"):
        table.add_column(name, justify="right")
    all_met = True
    for figure in FIGURES + INFO:
        values = [figure.get(r) for r in ordered]
        cells = ["-" if v is None else figure.fmt.format(v) for v in values]
        if figure.label == "completed / failed":
            cells = [f"{r.completed} / {r.failed}" for r in ordered]
        if figure.label.startswith("CPU %"):  # one cell per run: the shares of the roles
            cells = ["/".join(f"{r.cpu_shares.get(role, float('nan')):.0f}"
                              for role in RunWindow.ROLES) for r in ordered]
        vllm = [v for r, v in zip(ordered, values) if r.tool == "vllm" and v is not None]
        tuner = [v for r, v in zip(ordered, values) if r.tool == "tuner" and v is not None]
        versus, per_round, met = compare(figure, vllm, tuner)
        if figure in FIGURES:
            all_met &= met in ("", "n/a") or "yes" in met
        if figure is INFO[0]:
            table.add_section()
        table.add_row(figure.label, *cells, versus, per_round, target_text(figure), met)
    return table, all_met


def per_position_table(runs: list[RunFigures]) -> Table | None:
    if not any(r.per_position for r in runs):
        return None
    table = Table(title="per-position acceptance (accepted at position i / drafts)",
                  title_justify="left")
    table.add_column("run")
    table.add_column("p_0 .. p_k-1")
    for run in runs:
        table.add_row(f"{run.tool} #{run.round}",
                      " ".join(f"{p:.4f}" for p in run.per_position or []))
    return table


# ---------------------------------------------------------------- main


def tuner_version() -> str:
    """The commit the tuner's code was measured at, and whether tuner/ had local changes."""
    import subprocess

    def git(*argv: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), *argv], capture_output=True, text=True,
                              check=False).stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    return commit + (" (tuner/ modified)" if git("status", "--porcelain", "tuner") else "")



def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    requests = load_requests(args.workload, args.requests)
    spec = parse_spec(args.spec)
    out_dir = Path(args.out_dir or f".tuner/agreement/{datetime.now():%Y%m%d-%H%M%S}")
    out_dir.mkdir(parents=True, exist_ok=True)
    dataset = out_dir / "dataset.jsonl"
    write_dataset(requests, dataset)
    check_vllm_bench()
    version = tuner_version()  # read now: the tuner's modules are imported as they are now

    options = ServerOptions(server_args=args.server_arg or DEFAULT_SERVER_ARGS,
                            log_dir=Path(args.log_dir))
    server = VllmServer(args.model, spec, options)
    load_before = os.getloadavg()
    console.print(f"load average before: {load_before[0]:.2f} {load_before[1]:.2f} "
                  f"{load_before[2]:.2f}; starting vLLM ({server.label}) ...")
    runs: list[RunFigures] = []
    with server:
        console.print(f"server ready in {server.startup_s:.0f} s at {server.base_url}, "
                      f"log {server.log_path}")
        if args.prime:
            started = time.monotonic()
            replay(server.base_url, args.model, requests, LoadSpec("concurrency", args.concurrency))
            console.print(f"primed: the whole workload once, not measured "
                          f"({time.monotonic() - started:.0f} s)")
        for round_ in range(1, args.rounds + 1):
            tools = ["vllm", "tuner"]
            if args.order == "abba" and round_ % 2 == 0:
                tools.reverse()
            for tool in tools:
                started = time.monotonic()
                if args.reset_prefix_cache:
                    reset_prefix_cache(server.base_url)
                if tool == "vllm":
                    name = f"vllm-{round_}"
                    result, window = run_vllm_bench(
                        vllm_bench_argv(server.base_url, args.model, dataset, requests,
                                        args.concurrency, args.warmup, out_dir, name),
                        out_dir / f"{name}.txt", server)
                    runs.append(vllm_figures(result, round_, window))
                else:
                    runs.append(run_tuner(server, args.model, requests, args.concurrency,
                                          args.warmup, spec, round_, out_dir / f"tuner-{round_}.json"))
                console.print(f"{tool} #{round_}: {runs[-1].output_tokens_per_s:.1f} tok/s "
                              f"({time.monotonic() - started:.0f} s)")
        if not server.alive():
            raise TunerError(f"the vLLM server died during the runs; see {server.log_path}")
    load_after = os.getloadavg()
    for run in runs:  # greedy decoding: every run should generate exactly the same texts
        run.same_text = sum(a is not None and a == b
                            for a, b in zip(run.text_digests, runs[0].text_digests))

    order = "vllm first in each round" if args.order == "abab" else "order alternating (abba)"
    title = (f"{args.model} | {server.label} | {Path(args.workload).name} "
             f"({len(requests)} requests, output_tokens with ignore_eos) | "
             f"concurrency {args.concurrency} | "
             f"warm-up {args.warmup} per run{', primed' if args.prime else ''} | {order} | "
             "prefix cache "
             f"{'reset before each run' if args.reset_prefix_cache else 'never reset'}")
    table, all_met = results_table(runs, title)
    console.width = max(console.width, 110 + 13 * len(runs))  # no wrapped cells with many rounds
    console.print(table)
    if (positions := per_position_table(runs)) is not None:
        console.print(positions)
    console.print(f"load average before {load_before[0]:.2f} {load_before[1]:.2f} "
                  f"{load_before[2]:.2f}, after {load_after[0]:.2f} {load_after[1]:.2f} "
                  f"{load_after[2]:.2f} ({os.cpu_count()} cores)")
    console.print(f"tuner at commit {version}; results, dataset and vLLM's printout: {out_dir}; "
                  f"server log: {server.log_path}")
    console.print("every target met" if all_met else "[red]some targets NOT met[/]")
    return 0 if all_met else 1


if __name__ == "__main__":
    try:
        code = main()
    except TunerError as exc:
        console.print(f"[red]error:[/] {exc}")
        code = exc.exit_code
    # The server is stopped by now. Skip the interpreter's teardown: Triton, imported with vLLM,
    # prints dozens of "nanobind: leaked ..." lines at exit that would bury the table.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
