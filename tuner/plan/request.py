"""The one description of a study: ``StudyRequest``, built once from the flags over the study file
(``build_request``), stored as JSON on the study, its schedule and its jobs, and run by every
launcher (`tuner optimize`, `tuner worker`, `tuner serve`'s jobs, the dashboard) through
``tuner.study.run.run_study``. Everything in it is resolved: drafts by method, the ks, the
loads, absolute paths; so a worker or a nightly job reads it and needs nothing else.

What each process decides for itself (its GPUs, how many workers, its heartbeat) is not part of
it: that is ``tuner.study.run.Placement``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_validator

from tuner.decide.answer import DEFAULT_NOISE
from tuner.decide.output_check import NEAR_TIE_MARGIN
from tuner.decide.slo import parse_slos
from tuner.engine.server import parse_synthetic_acceptance
from tuner.errors import UsageError
from tuner.plan.settings import OptimizeSettings
from tuner.plan.space import DEFAULT_NGRAM_LOOKUP, SearchSpace
from tuner.replay import LoadSpec


class Part(BaseModel):
    """A part of a request: unknown keys are refused, values never change once built."""

    # Each field's docstring is its description (docs/reference/study-request.md is made of them).
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class Space(Part):
    """What the study may try: the baseline always, then these methods, drafts and ks."""

    methods: tuple[str, ...]
    """Methods tried beside the baseline (--method, [space] methods, or those of the drafts)."""
    ks: tuple[int, ...]
    """num_speculative_tokens values of the chain drafters (--k)."""
    drafts: dict[str, tuple[str, ...]] = {}
    """Draft checkpoints by method, each --draft PATH sorted to the method its config names."""
    fixed_k: dict[str, int] = {}
    """Block drafters (dflash, dspark): the block size each checkpoint was trained for."""
    ngram_lookup: tuple[tuple[int, int], ...] = DEFAULT_NGRAM_LOOKUP
    """ngram's (prompt_lookup_min, prompt_lookup_max) pairs (--ngram-lookup)."""
    adaptive_verification: bool = False
    """Each drafter's configs also with vLLM's adaptive verification, measured beside its fixed k
    (--adaptive-verification)."""

    def search_space(self) -> SearchSpace:
        return SearchSpace(methods=self.methods, ks=self.ks, drafts=dict(self.drafts),
                           fixed_k=dict(self.fixed_k), ngram_lookup=self.ngram_lookup,
                           adaptive=self.adaptive_verification)


class Loads(Part):
    """The loads every trial is replayed at, in order, on its one server."""

    mode: Literal["concurrency", "rate", "trace"] = "concurrency"
    """Closed loop of clients, Poisson arrivals, or the captured trace (--load)."""
    concurrency: tuple[int, ...] = (1,)
    """Client counts of the closed loop; several give a k per batch size (--concurrency)."""
    rate: tuple[float, ...] | None = None
    """Requests per second of the Poisson loads (--rate)."""
    time_scale: float = 1.0
    """Multiplies the captured gaps of --load trace (--time-scale)."""

    def specs(self, seed: int) -> tuple[LoadSpec, ...]:
        if self.mode == "rate":
            return tuple(LoadSpec("rate", self.concurrency[0], r, self.time_scale, seed) for r in self.rate or (None,))
        if self.mode == "concurrency":
            return tuple(LoadSpec("concurrency", c, None, self.time_scale, seed) for c in self.concurrency)
        return (LoadSpec(self.mode, self.concurrency[0], (self.rate or (None,))[0], self.time_scale, seed),)


class Server(Part):
    """How each trial's vLLM server is started; ``deploy_args`` are also kept in the answer."""

    cmd: str | None = None
    """Server command template with {model}; None: `vllm serve {model}` (--server-cmd)."""
    args: tuple[str, ...] = ()
    """Tuning-only server arguments, left out of the answer's serve line (--server-arg)."""
    deploy_args: tuple[str, ...] = ()
    """Server arguments production uses too, kept in the answer's serve line (--deploy-arg)."""

    @property
    def all_args(self) -> list[str]:
        """What every trial's server gets: the tuning arguments, then the deployed ones."""
        return [*self.args, *self.deploy_args]


class Rules(Part):
    """How many trials, and the rules the answer is decided under."""

    trials: int = 20
    """Server starts the study may spend, baseline included (--trials)."""
    time_limit_s: float | None = None
    """No server start whose trial would end later than this after the start (--time-limit)."""
    noise: float = DEFAULT_NOISE
    """A winner must beat the baseline by more than this fraction (--noise)."""
    seed: int = 0
    """Seed of the sampler and of Poisson arrivals (--seed)."""
    strategy: str = "guided"
    """guided, tpe or grid (--strategy)."""
    slos: tuple[str, ...] = ()
    """Latency targets like tpot_p99_ms<=40, at every load (--slo)."""
    warm_start: bool = True
    """A new study starts from the previous best of its model and workload type (--warm-start)."""
    max_output_change: float = 0.0
    """Share of greedy requests a config may change and still be chosen (--max-output-change)."""
    allow_output_change: bool = False
    """Choose a config whatever greedy output it changed, with a warning (--allow-output-change)."""
    near_tie_margin: float = NEAR_TIE_MARGIN
    """A divergence where the baseline's top two were closer than this is a near-tie (--near-tie-margin)."""


class RunSettings(Part):
    """How each configuration is measured and its server started (`tuner measure` too). The
    defaults are the CLI's: its options read them from here."""

    warmup: int = 2
    """Requests sent first and not measured (--warmup)."""
    warmup_until_steady: bool = False
    """Then replay unmeasured until the tokens/s stops rising (--warmup-until-steady)."""
    repeats: int = 1
    """Replays per configuration; figures are their median (--repeats)."""
    max_repeats: int | None = None
    """Replay on until the tokens/s is known to --precision, or this many replays (--max-repeats)."""
    precision: float = 0.02
    """Relative half-width of the 95 % interval that ends the replays (--precision)."""
    requests_per_client: int | None = None
    """At concurrency c, replay the first c x N requests (--requests-per-client)."""
    repeat_mode: str = "same-server"
    """same-server or fresh-server (--repeat-mode)."""
    max_tokens: int = 128
    """Output length of requests that give none (--max-tokens)."""
    request_timeout: float = 600.0
    """Seconds before a request counts as failed (--request-timeout)."""
    start_timeout: float = 900.0
    """Seconds to wait for the server's /health (--start-timeout)."""
    download_timeout: float = 3600.0
    """Seconds a first start may spend downloading (--download-timeout)."""
    retries: int = 1
    """Tries again after a fault of the host, not the config (--retries)."""
    retry_wait: float = 30.0
    """Seconds before the first retry; doubles with each (--retry-wait)."""
    log_dir: Path | None = None
    """Where server logs go; None: .tuner/logs in the measuring process's folder (--log-dir)."""
    synthetic_acceptance: str | None = None
    """What-if acceptance profile like 0.74,0.54,0.41, as given (--synthetic-acceptance)."""

    @field_validator("synthetic_acceptance")
    @classmethod
    def _profile(cls, text: str | None) -> str | None:
        if text:
            parse_synthetic_acceptance(text)  # a malformed profile is refused here, in its words
        return text

    @property
    def acceptance_rates(self) -> tuple[float, ...] | None:
        return parse_synthetic_acceptance(self.synthetic_acceptance) if self.synthetic_acceptance else None

    @property
    def logs(self) -> Path:
        return self.log_dir or Path(".tuner/logs")


class StudyRequest(Part):
    """A study, as asked: the workload and model, the space, the loads, the server, the rules, how
    each trial is measured, the study's name and its database."""

    workload: str
    """The workload JSONL, as an absolute path (--workload)."""
    workload_type: str | None = None
    """Its type; None: the file name stem (--type)."""
    model: str
    """The target model, a path or a hub name (--model)."""
    space: Space
    loads: Loads
    server: Server
    rules: Rules
    run: RunSettings
    name: str | None = None
    """The study's name; None: "MODEL | TYPE | LOAD", set once the workload is read (--name)."""
    db: str
    """The results database URL (--db)."""

    def load_specs(self) -> tuple[LoadSpec, ...]:
        return self.loads.specs(self.rules.seed)

    def settings(self, join: bool = False) -> OptimizeSettings:
        """The study loop's settings; ``join``: this process joins a study others run."""
        rules = self.rules
        return OptimizeSettings(
            trials=rules.trials, time_limit_s=rules.time_limit_s, noise=rules.noise, seed=rules.seed,
            strategy=rules.strategy, slos=parse_slos(list(rules.slos)), warm_start=rules.warm_start,
            name=self.name, join=join, max_output_change=rules.max_output_change,
            allow_output_change=rules.allow_output_change, near_tie_margin=rules.near_tie_margin,
            deploy_args=self.server.deploy_args)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @classmethod
    def from_json(cls, data: dict[str, Any] | str, where: str) -> "StudyRequest":
        """A stored request; ``where`` names it in the sentence when it cannot be read."""
        try:
            return cls.model_validate_json(data) if isinstance(data, str) else cls.model_validate(data)
        except ValueError as exc:
            raise UsageError(f"{where} holds no study request this tuner can read ({_first_error(exc)}); "
                             "start the study again with `tuner optimize`") from None


def _first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        return f"{'.'.join(map(str, first['loc'])) or 'request'}: {first['msg']}"
    return str(exc)


def summary(stored: dict[str, Any] | None) -> str:
    """One line for a stored request, as the schedule list and the dashboard show it."""
    if stored and "before_requests" in stored:
        return ("stored by an older tuner (optimize options: " + " ".join(stored["before_requests"])
                + "); remove the schedule and add it again")
    try:
        request = StudyRequest.model_validate(stored or {})
    except ValueError:
        return "no study request this tuner can read; remove the schedule and add it again"
    space, loads = request.space, request.loads
    levels = ",".join(f"{x:g}" for x in (loads.rate or ()) if loads.mode == "rate") or ",".join(map(str, loads.concurrency))
    drafts = [d for ds in space.drafts.values() for d in ds]
    return " · ".join([f"methods {', '.join(space.methods)}", f"k {','.join(map(str, space.ks))}",
                       *([f"drafts {', '.join(drafts)}"] if drafts else []), f"{loads.mode} {levels}",
                       f"{request.rules.trials} trials", f"{request.rules.strategy}",
                       *([f"targets {', '.join(request.rules.slos)}"] if request.rules.slos else [])])
