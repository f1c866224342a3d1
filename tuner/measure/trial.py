"""One measurement of one configuration: the single path every trial takes.

Fresh server for the config -> warm-up -> /metrics before -> replay -> /metrics after -> stop.
The CLI's ``tuner measure``, the Optuna study, the scheduler and the tests all call
``measure_config``.
"""

from __future__ import annotations

import itertools
import platform
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

import httpx

from tuner.engine import ServerOptions, SpecConfig, VllmServer
from tuner.engine.installed import refused_at_start
from tuner.errors import MetricsError, RefusedAtStart, ServerDiedError, TunerError, UsageError
from tuner.metrics import Acceptance, ServerLatency, acceptance_between, latency_between, scrape_counters
from tuner.replay import LoadSpec, ReplaySummary, RequestResult, first_different_token, replay, summarize
from tuner.replay.acceptance import RequestSteps, RequestsAcceptance, by_context, request_steps, requests_acceptance
from tuner.decide.stats import RepeatStats, relative_precision, repeat_stats
from tuner.decide.marks import REMEASURABLE, REPEATS_DISAGREE, repeats_disagree, run_marks, still_client_bound
from tuner.workload import Workload


DYING_S = 15.0  # how long a server whose /metrics went away may take to exit and count as dead


@dataclass(frozen=True)
class MeasureSettings:
    """Everything about how a configuration is measured, apart from the config itself."""

    load: LoadSpec = field(default_factory=LoadSpec)
    warmup: int = 2  # requests sent first and excluded: the first request after start is slow
    # Then warm-up replays of the load's requests until the tokens/s stops rising (``steady``):
    # on an H200 a fresh server's tokens/s climbed for up to a minute of load (docs/lab/gpu.md section 7).
    warmup_until_steady: bool = False
    repeats: int = 1  # replays of the workload per configuration
    # "same-server": one server, prefix cache reset between replays (one start per config);
    # "fresh-server": a new server per replay (steadier on a busy host, docs/lab/search.md#repeat-modes-and-cpu-pinning; but a
    # restart per repeat).
    repeat_mode: str = "same-server"
    # Replays go on past ``repeats`` until the tokens/s is known to ``precision`` (half the 95 %
    # interval, relative) or ``max_repeats`` replays; None: exactly ``repeats``.
    max_repeats: int | None = None
    precision: float = 0.02
    # Requests per closed-loop client a replay sends: at concurrency c, the workload's first
    # c x this many (all of it when fewer). None: the whole workload at every load. A replay at
    # concurrency 1 then lasts about as long as one at 32 (on an H200, 144 requests at 1 took 48 s).
    requests_per_client: int | None = None
    # Load label -> tokens/s that a config must be able to reach to still be chosen there (the
    # study's best so far, less the tie tolerance): a config whose 95 % interval ends below it
    # needs no more replays at that load, however imprecise (``enough_replays``).
    out_of_reach: Mapping[str, float] = field(default_factory=dict, hash=False)
    sampling_seed: int | None = 0  # seeds requests that sample without a seed of their own
    # A transient fault (TunerError.transient: a port taken, GPU memory not freed yet) is tried
    # again this many times, after retry_wait_s, then twice that, and so on.
    retries: int = 1
    retry_wait_s: float = 30.0

    def __post_init__(self) -> None:
        if self.repeats < 1:
            raise UsageError(f"--repeats must be >= 1, got {self.repeats}")
        if self.repeat_mode not in ("same-server", "fresh-server"):
            raise UsageError(f"--repeat-mode must be same-server or fresh-server, got {self.repeat_mode!r}")
        if self.max_repeats is not None and self.max_repeats < self.repeats:
            raise UsageError(f"--max-repeats must be >= --repeats ({self.repeats}), got {self.max_repeats}")
        if not 0 < self.precision < 1:
            raise UsageError(f"--precision must be between 0 and 1 (0.02: +-2 %), got {self.precision}")
        if self.warmup < 0:
            raise UsageError(f"--warmup must be >= 0, got {self.warmup}")
        if self.requests_per_client is not None and self.requests_per_client < 1:
            raise UsageError(f"--requests-per-client must be >= 1, got {self.requests_per_client}")
        if self.retries < 0 or self.retry_wait_s < 0:
            raise UsageError(f"--retries and --retry-wait must be >= 0, got {self.retries} and "
                             f"{self.retry_wait_s}")
    request_timeout_s: float = 600.0
    default_max_tokens: int = 128
    server: ServerOptions = field(default_factory=ServerOptions)
    # Further loads replayed on the same server after ``load`` (``--concurrency 1,4,16``): a
    # figure per load for the price of one restart.
    extra_loads: tuple[LoadSpec, ...] = ()

    def replayed(self, workload: Workload, load: LoadSpec) -> Workload:
        """The part of ``workload`` a replay at ``load`` sends (``requests_per_client``)."""
        if self.requests_per_client is None or load.mode != "concurrency":
            return workload
        n = load.concurrency * self.requests_per_client
        return workload if n >= len(workload.requests) else replace(workload, requests=workload.requests[:n])

    @property
    def loads(self) -> tuple[LoadSpec, ...]:
        return (self.load, *self.extra_loads)

    @property
    def loads_label(self) -> str:
        return loads_label(self.loads)


def loads_label(loads: tuple[LoadSpec, ...]) -> str:
    """'concurrency 4', or 'concurrency 1,4,16' for several levels of one mode."""
    if len(loads) == 1:
        return loads[0].label
    if all(load.mode == "concurrency" for load in loads):
        return "concurrency " + ",".join(str(load.concurrency) for load in loads)
    return " + ".join(load.label for load in loads)


@dataclass(frozen=True)
class ServerRecord:
    command: list[str]
    log_path: str
    startup_s: float
    pid: int
    port: int
    vllm_version: str | None


@dataclass(frozen=True)
class RunResult:
    """One replay of the workload."""

    repeat: int
    summary: ReplaySummary
    acceptance: Acceptance | None
    server_generation_tokens: int  # from /metrics; cross-checks the client's own count
    requests: list[RequestResult]
    server_latency: ServerLatency | None = None  # the server's own histograms over this replay
    marks: tuple[str, ...] = ()  # why figures of this replay cannot be trusted (tuner.decide.marks)
    remeasured: tuple[str, ...] = ()  # the marks of an earlier replay this one replaced
    # Acceptance per request and by context length, from the requests' streams (speculative
    # configs only); its total is held against ``acceptance`` (the counters) by the marks.
    request_acceptance: RequestAcceptance | None = None


@dataclass(frozen=True)
class RequestAcceptance:
    """A replay's acceptance as its requests saw it: each request's steps, their total, and the
    acceptance length per context-length bucket."""

    steps: tuple[RequestSteps, ...]
    total: RequestsAcceptance | None
    by_context: tuple[dict, ...]

    @classmethod
    def of(cls, results: Sequence[RequestResult]) -> RequestAcceptance | None:
        steps = tuple(s for r in results if (s := request_steps(r)) is not None)
        return cls(steps, requests_acceptance(steps), tuple(by_context(steps))) if steps else None

    def to_dict(self) -> dict[str, Any]:
        """As stored with the run: the total, the buckets, and per request (RequestSteps.to_list)."""
        return {**(self.total.to_dict() if self.total else {}), "by_context": list(self.by_context),
                "per_request": {s.request_id: s.to_list() for s in self.steps}}


@dataclass(frozen=True)
class Measurement:
    """The outcome of one measured configuration; ``spec`` None is the no-speculation baseline."""

    model: str
    workload_path: str
    workload_type: str
    spec: dict[str, Any] | None
    load: str
    warmup_requests: int
    server: ServerRecord
    runs: list[RunResult]
    host: str
    started_at: str
    finished_at: str
    # The baseline's only: request id -> per generated token of its first run, the lead of that
    # token's log-probability over the runner-up's (a small one is a numeric near-tie).
    reference_margins: dict[str, list[float | None]] | None = None
    # --warmup-until-steady: tokens/s of each warm-up replay at this load, not measured.
    warmup_tokens_per_s: tuple[float, ...] = ()

    @property
    def tokens_per_s(self) -> RepeatStats:
        return repeat_stats([run.summary.output_tokens_per_s for run in self.runs])

    @property
    def precision(self) -> float:
        """Half the 95 % interval of the replays' mean tokens/s, relative (inf from one replay)."""
        return relative_precision([run.summary.output_tokens_per_s for run in self.runs])

    @property
    def median_run(self) -> RunResult:
        """The run whose tokens/s is the median (the lower middle one for an even count): every
        per-trial figure but the spread of tokens/s comes from it."""
        ranked = sorted(self.runs, key=lambda run: run.summary.output_tokens_per_s)
        return ranked[(len(ranked) - 1) // 2]

    @property
    def summary(self) -> ReplaySummary:
        return self.median_run.summary

    @property
    def acceptance(self) -> Acceptance | None:
        return self.median_run.acceptance

    def marks(self, noise: float = 0.05) -> tuple[str, ...]:
        """The median run's marks, and whether the repeats disagree beyond ``noise``."""
        spread = [run.summary.output_tokens_per_s for run in self.runs]
        return self.median_run.marks + ((REPEATS_DISAGREE,) if repeats_disagree(spread, noise) else ())

    @property
    def label(self) -> str:
        return SpecConfig.from_vllm(self.spec).label if self.spec else "baseline (no speculation)"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "tokens_per_s": asdict(self.tokens_per_s)}


class Progress(Protocol):
    """What a measurement reports while it runs; the CLI draws it with rich."""

    def phase(self, description: str) -> None: ...

    def start_replay(self, description: str, total: int) -> None: ...

    def request_done(self, result: RequestResult) -> None: ...


class NoProgress:
    def phase(self, description: str) -> None:
        pass

    def start_replay(self, description: str, total: int) -> None:
        pass

    def request_done(self, result: RequestResult) -> None:
        pass


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _vllm_version(base_url: str) -> str | None:
    try:
        return httpx.get(f"{base_url}/version", timeout=5.0).json().get("version")
    except (httpx.HTTPError, ValueError):
        return None


def _reset_prefix_cache(server: VllmServer) -> None:
    """Repeats replay the same prompts: without a reset, the second run would hit the cache."""
    try:
        httpx.post(f"{server.base_url}/reset_prefix_cache", timeout=30.0).raise_for_status()
    except httpx.HTTPStatusError as exc:
        raise TunerError(f"could not reset the prefix cache between repeats ({exc}); the server "
                         "needs VLLM_SERVER_DEV_MODE=1, which the tuner sets unless overridden") from None
    except httpx.HTTPError as exc:
        raise TunerError(f"the server stopped answering between replays ({exc or type(exc).__name__}); "
                         f"see its log {server.log_path}") from None


def _died(server: VllmServer, during: str) -> ServerDiedError:
    """The config's failure, with vLLM's own reason from the server log and the log's path."""
    cause = server.death_cause()
    error = ServerDiedError(
        f"the vLLM server ({server.label}) died during {during}"
        + (f": {cause}" if cause else "") + f". Full log: {server.log_path}"
    )
    error.cause, error.log_path = cause, server.log_path  # stored with the failed trial
    return error


def _check_serving(server: VllmServer, results: Sequence[RequestResult], during: str) -> None:
    """Raise ``_died`` where the server is gone, or where requests failed because its engine died
    (the API server can outlive its engine for a moment, answering 500s and cut streams): the
    config's own failure, named by vLLM's reason, not by what the client saw of the streams."""
    if not server.alive() or (any(not r.ok for r in results) and server.engine_gone()):
        raise _died(server, during)


def measure_config(
    model: str,
    spec: SpecConfig | None,
    workload: Workload,
    settings: MeasureSettings | None = None,
    progress: Progress | None = None,
) -> Measurement:
    """Measure one configuration at ``settings.load`` on a fresh vLLM server."""
    settings = replace(settings or MeasureSettings(), extra_loads=())
    return measure_config_at_loads(model, spec, workload, settings, progress)[0]


def measure_config_at_loads(
    model: str,
    spec: SpecConfig | None,
    workload: Workload,
    settings: MeasureSettings | None = None,
    progress: Progress | None = None,
) -> list[Measurement]:
    """Measure one configuration on a fresh vLLM server at each of ``settings.loads``, in order;
    one Measurement per load. The server is always stopped."""
    settings = settings or MeasureSettings()
    progress = progress or NoProgress()
    if settings.repeat_mode == "fresh-server" and settings.repeats > 1:
        once = replace(settings, repeats=1, max_repeats=None)
        parts = [measure_config_at_loads(model, spec, workload, once, progress)
                 for _ in range(settings.repeats)]
        return [replace(per_load[0], runs=[replace(p.runs[0], repeat=i) for i, p in enumerate(per_load)],
                        finished_at=per_load[-1].finished_at)
                for per_load in zip(*parts)]
    if spec is not None and settings.server.server_cmd is None:  # the installed vLLM runs it
        if reason := refused_at_start(spec.method, spec.adaptive_verification):
            raise RefusedAtStart(f"not started: the installed vLLM refuses {spec.label} at start: {reason}",
                                 cause=reason)
    attempt = 0
    while True:
        try:
            return _measure_on_one_server(model, spec, workload, settings, progress)
        except TunerError as exc:
            if not exc.transient or attempt == settings.retries:
                raise
            wait_s = settings.retry_wait_s * 2 ** attempt
            progress.phase(f"not the config's fault, trying again in {wait_s:.0f} s: {exc}")
            time.sleep(wait_s)
            attempt += 1


def _measure_on_one_server(model: str, spec: SpecConfig | None, workload: Workload,
                           settings: MeasureSettings, progress: Progress) -> list[Measurement]:
    started_at = _now()
    server = VllmServer(model, spec, settings.server)
    server.checked_command()  # a bad --server-cmd fails before anything is shown or started
    progress.phase(f"starting vLLM ({server.label}), log {settings.server.log_dir}")
    with server:
        progress.phase(f"server ready in {server.startup_s:.0f} s")
        measurements = measure_on_server(server, model, spec, workload, settings, progress, started_at)
        progress.phase("stopping the server")
    finished_at = _now()
    return [replace(m, finished_at=finished_at) for m in measurements]


def measure_on_server(server: VllmServer, model: str, spec: SpecConfig | None, workload: Workload,
                      settings: MeasureSettings | None = None, progress: Progress | None = None,
                      started_at: str | None = None) -> list[Measurement]:
    """What a trial does on its server once it is up, at each of ``settings.loads`` in order:
    the prefix cache reset between loads, the warm-up requests, the warm-up until steady where
    asked, the replays with /metrics read around each; for the baseline (``spec`` None), the
    greedy reference's top-2 margins. One Measurement per load (``finished_at``: when the last
    load was measured). The server is left running: its caller started it and stops it.
    ``measure_config_at_loads`` calls it on the fresh server it starts for a trial;
    benchmarks/agreement.py on a server that vllm bench serve measures too."""
    settings = settings or MeasureSettings()
    progress = progress or NoProgress()
    if settings.sampling_seed is not None:
        workload = workload.with_default_seeds(settings.sampling_seed)
    started_at = started_at or _now()
    runs_by_load, warm_by_load = [], []
    for index, load in enumerate(settings.loads):
        if index:
            _reset_prefix_cache(server)
        _warm_up(server, model, workload, load, settings, progress)
        replayed = settings.replayed(workload, load)
        warm_by_load.append(warm_up_until_steady(server, model, replayed, load, settings, progress))
        runs_by_load.append(_replays(server, model, spec, replayed, load, settings, progress))
    # Every load's greedy requests get their margins, not only the first load's: with
    # --requests-per-client a higher load replays more of the workload, and a divergence
    # there needs its margin to be told from a real change.
    widest = max(settings.loads, key=lambda load: len(settings.replayed(workload, load).requests))
    margins = (_reference_margins(server, model, settings.replayed(workload, widest), settings, progress)
               if spec is None else None)
    record = ServerRecord(
        command=server.command(), log_path=str(server.log_path), startup_s=server.startup_s or 0.0,
        pid=server.process.pid if server.process else -1, port=server.port,
        vllm_version=_vllm_version(server.base_url),
    )
    finished_at = _now()
    return [Measurement(
        model=model,
        workload_path=str(Path(workload.path)),
        workload_type=workload.type,
        spec=spec.to_vllm() if spec else None,
        load=load.label,
        warmup_requests=settings.warmup,
        server=record,
        runs=runs,
        host=platform.node(),
        started_at=started_at,
        finished_at=finished_at,
        reference_margins=_aligned(margins, runs[0].requests) if margins is not None else None,
        warmup_tokens_per_s=warm,
    ) for load, runs, warm in zip(settings.loads, runs_by_load, warm_by_load)]


def _reference_margins(server: VllmServer, model: str, workload: Workload, settings: MeasureSettings,
                       progress: Progress) -> dict[str, tuple[tuple[int, ...], tuple[float | None, ...]]]:
    """The baseline's greedy requests once more, after its measured replays and outside them,
    asking vLLM for the top two candidates of every token: request id -> (token ids, margins)."""
    greedy = [r for r in workload.requests if r.temperature == 0]
    if not greedy:
        return {}
    _reset_prefix_cache(server)
    progress.start_replay("greedy reference with top-2 logprobs", len(greedy))
    results, _ = replay(server.base_url, model, greedy, LoadSpec("concurrency", settings.load.concurrency),
                        request_timeout_s=settings.request_timeout_s,
                        default_max_tokens=settings.default_max_tokens, on_result=progress.request_done,
                        top_logprobs=2)
    return {r.request_id: (r.token_ids, r.margins) for r in results if r.ok and r.token_ids and r.margins}


def _aligned(margins: dict[str, tuple[tuple[int, ...], tuple[float | None, ...]]],
             measured: Sequence[RequestResult]) -> dict[str, list[float | None]]:
    """Margins for the measured run's own tokens: as far as the reference pass generated the same
    ones, and at the token where the two passes part (a baseline can itself flip a near-tie
    between two passes; up to that token both saw the same prefix, so its lead there is the one
    that decided, and it is the near-tie a drafter would flip too)."""
    out = {}
    for r in measured:
        if r.request_id in margins and r.token_ids:
            ids, lead = margins[r.request_id]
            same = first_different_token(ids, r.token_ids)
            out[r.request_id] = [None if m is None else round(m, 4) for m in lead[:same + 1]]
    return out


# A warm-up replay no more than this much faster than the one before it shows the server steady;
# at most this many warm-up replays are sent, steady or not.
STEADY_RISE = 0.03
MAX_WARMUP_REPLAYS = 6


def steady(tokens_per_s: Sequence[float], rise: float = STEADY_RISE) -> bool:
    """Whether the server's tokens/s has stopped rising: the last warm-up replay is not faster
    than the one before it by more than ``rise`` (a fall counts as steady: noise, not warm-up)."""
    return len(tokens_per_s) >= 2 and tokens_per_s[-1] <= tokens_per_s[-2] * (1 + rise)


def warm_up_until_steady(server: VllmServer, model: str, workload: Workload, load: LoadSpec,
                          settings: MeasureSettings, progress: Progress) -> tuple[float, ...]:
    """With ``warmup_until_steady``: replays of the load's requests, as a measured replay sends
    them (prefix cache reset first), until ``steady`` or MAX_WARMUP_REPLAYS; their tokens/s."""
    if not settings.warmup_until_steady:
        return ()
    seen: list[float] = []
    while not steady(seen) and len(seen) < MAX_WARMUP_REPLAYS:
        _reset_prefix_cache(server)
        progress.start_replay(f"warm-up until steady {len(seen) + 1}/{MAX_WARMUP_REPLAYS}", len(workload.requests))
        results, duration = replay(server.base_url, model, workload.requests, load,
                                   request_timeout_s=settings.request_timeout_s,
                                   default_max_tokens=settings.default_max_tokens, on_result=progress.request_done)
        _check_serving(server, results, "warm-up")
        seen.append(summarize(results, duration).output_tokens_per_s)
    state = "steady" if steady(seen) else f"still rising after {len(seen)}, measured anyway"
    progress.phase(f"warm-up at {load.label}: {', '.join(f'{v:.0f}' for v in seen)} tok/s ({state})")
    _reset_prefix_cache(server)
    return tuple(seen)


def _warm_up(server: VllmServer, model: str, workload: Workload, load: LoadSpec,
             settings: MeasureSettings, progress: Progress) -> None:
    """A few requests at the load's concurrency, excluded from the figures."""
    if settings.warmup <= 0:
        return
    warm = list(itertools.islice(itertools.cycle(workload.requests), settings.warmup))
    progress.start_replay("warm-up", len(warm))
    warm_results, _ = replay(
        server.base_url, model, warm, LoadSpec("concurrency", load.concurrency),
        request_timeout_s=settings.request_timeout_s,
        default_max_tokens=settings.default_max_tokens, on_result=progress.request_done,
    )
    _check_serving(server, warm_results, "warm-up")
    if not any(r.ok for r in warm_results):
        raise TunerError(f"every warm-up request failed ({warm_results[0].error}); "
                         f"check the workload against the server log {server.log_path}")


def enough_replays(tokens_per_s: Sequence[float], settings: MeasureSettings, load: str | None = None) -> bool:
    """``repeats`` replays, then more on the same server until the tokens/s is known to
    ``precision`` or ``max_repeats`` is reached, or until the 95 % interval of its mean ends
    below what it would need to be chosen at ``load`` (``settings.out_of_reach``): precision
    decides between contenders, and a config out of reach is none (on the H200, six replays
    of 48 s each at concurrency 1 went to a draft model at a third of the best's speed)."""
    n = len(tokens_per_s)
    if n < settings.repeats:
        return False
    if settings.max_repeats is None or n >= settings.max_repeats:
        return True
    precision = relative_precision(tokens_per_s)
    reach = settings.out_of_reach.get(load) if load is not None else None
    if reach is not None and statistics.fmean(tokens_per_s) * (1 + precision) < reach:
        return True
    return precision <= settings.precision


def _replays(server: VllmServer, model: str, spec: SpecConfig | None, workload: Workload,
             load: LoadSpec, settings: MeasureSettings, progress: Progress) -> list[RunResult]:
    """Replays of the workload at one load, /metrics read around each, until
    ``enough_replays``. A replay whose figures are marked for a reason another replay can clear
    (a stalled client, a token count off the server's) is replayed once more, and the new one
    kept."""
    runs: list[RunResult] = []
    most = settings.max_repeats or settings.repeats
    while not enough_replays([r.summary.output_tokens_per_s for r in runs], settings, load.label):
        repeat = len(runs)
        if repeat:
            _reset_prefix_cache(server)
        label = f" {repeat + 1}/{most}" if most > 1 else ""
        run = _replay_once(server, model, spec, workload, load, settings, progress, repeat, label)
        # Failed requests explain the marks and fail the trial anyway: no second replay.
        if (retry := tuple(m for m in run.marks if m in REMEASURABLE)) and not run.summary.failed:
            progress.phase(f"replaying once more: {', '.join(retry)}")
            _reset_prefix_cache(server)
            again = _replay_once(server, model, spec, workload, load, settings, progress, repeat, f"{label} again")
            run = replace(again, remeasured=retry, marks=still_client_bound(again.marks))
        runs.append(run)
    return runs


def _replay_once(server: VllmServer, model: str, spec: SpecConfig | None, workload: Workload,
                 load: LoadSpec, settings: MeasureSettings, progress: Progress, repeat: int,
                 label: str) -> RunResult:
    before = scrape_counters(server.base_url)
    progress.start_replay(f"replay{label} ({load.label})", len(workload))
    results, duration = replay(
        server.base_url, model, workload.requests, load,
        request_timeout_s=settings.request_timeout_s,
        default_max_tokens=settings.default_max_tokens, on_result=progress.request_done,
    )
    _check_serving(server, results, "the replay")
    try:
        after = scrape_counters(server.base_url)
    except MetricsError:
        # A /metrics that stops answering right after a replay is most often a server going
        # down (its engine died): that is the config's own failure, not a passing one.
        if server.exits_within(DYING_S):
            raise _died(server, "the replay") from None
        raise
    summary = summarize(results, duration)
    generated = int(after.generation_tokens - before.generation_tokens)
    latency = latency_between(before, after)
    counters = acceptance_between(before, after, spec.k if spec else None)
    # The baseline's too: its decode rate by context length is what a config's is held against.
    per_request = RequestAcceptance.of(results)
    return RunResult(
        repeat=repeat, summary=summary, acceptance=counters,
        server_generation_tokens=generated, requests=results, server_latency=latency,
        marks=run_marks(summary, results, latency, generated, counters,
                        per_request.total if per_request else None),
        request_acceptance=per_request,
    )
