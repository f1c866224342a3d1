"""What a study is asked, from the command line's flags over a TOML study file.

```toml
trials = 12
time_limit = "10m"             # or seconds: 600
noise = 0.05
strategy = "guided"            # or tpe, grid
slo = ["tpot_p99_ms<=40"]
[space]
methods = ["ngram", "draft_model"]
k = "1-6"                      # or [1, 2, 4]
ngram_lookup = ["2-4", "3-5"]
fixed_k = { dflash = 7 }        # only where the checkpoint's block size cannot be read
adaptive_verification = false  # true: each drafter also with vLLM's adaptive verification
[space.drafts]
draft_model = ["/models/qwen3-0.6b"]
[server]
cmd = "vllm serve {model}"
args = ["--max-model-len=4096"]
[load]
mode = "concurrency"           # or rate, trace
concurrency = 8                # or [1, 4, 16, 64]: one trial replays each level on its server
```

``build_request`` makes the flags and the file one ``StudyRequest`` (tuner/plan/request.py), and
``study_plan`` the plan the study loop runs from it. Also where the flags that say how each
configuration is measured (``RunSettings``) become ``MeasureSettings`` (``measure_settings``).
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


from tuner.engine import ServerOptions
from tuner.engine.installed import per_request_spec_metrics
from tuner.errors import UsageError
from tuner.replay import LoadSpec
from tuner.decide.answer import DEFAULT_NOISE
from tuner.plan.checks import check_space, check_synthetic_acceptance
from tuner.store import database_url
from tuner.decide.output_check import NEAR_TIE_MARGIN
from tuner.decide.slo import parse_slos
from tuner.plan.request import Loads, Rules, RunSettings, Server, Space, StudyRequest
from tuner.plan.settings import OptimizeSettings, parse_time_limit
from tuner.plan.space import (DEFAULT_KS, SearchSpace, block_ks, drafts_by_method, parse_ks,
                                parse_lookup, proposal_ks)
from tuner.measure.trial import MeasureSettings
from tuner.workload import Workload, load_workload

KEYS = {
    "": {"trials", "time_limit", "noise", "strategy", "slo", "max_output_change", "allow_output_change", "near_tie_margin",
         "space", "server", "load"},
    "space": {"methods", "k", "ngram_lookup", "fixed_k", "drafts", "adaptive_verification"},
    "server": {"cmd", "args", "deploy_args"},
    "load": {"mode", "concurrency", "rate", "time_scale"},
}


@dataclass(frozen=True)
class StudyPlan:
    space: SearchSpace
    loads: tuple[LoadSpec, ...]
    server_cmd: str | None
    server_args: list[str]
    options: OptimizeSettings

    @property
    def load(self) -> LoadSpec:
        return self.loads[0]


def parse_levels(value: Any, name: str, kind: type = int) -> tuple:
    """'1,4,16' (a flag) or [1, 4, 16] or 8 (the study file) -> distinct levels in order."""
    items = value if isinstance(value, list) else str(value).replace(" ", "").split(",")
    try:
        levels = tuple(dict.fromkeys(kind(x) for x in items if str(x)))
    except ValueError:
        raise UsageError(f"--{name} {value!r} must be a number or a list like 1,4,16") from None
    if not all(math.isfinite(level) for level in levels):
        raise UsageError(f"--{name} {value!r} must be finite numbers, like 1,4,16")
    if not levels:
        raise UsageError(f"--{name} {value!r} names no level; write it like 1,4,16")
    return levels


def read_toml(path: Path, missing: str) -> dict[str, Any]:
    """A TOML file's tables; ``missing``: the sentence after "PATH: " when there is no file."""
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise UsageError(f"{path}: {missing}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML ({exc})") from None


def load_study_file(path: Path) -> dict[str, Any]:
    """Read a TOML study file; unknown keys are refused so that a typo is not silently ignored."""
    study = read_toml(path, "no such study file")
    for section, allowed in KEYS.items():
        table = study.get(section, {}) if section else study
        if not isinstance(table, dict):
            raise UsageError(f"{path}: [{section}] must be a table")
        unknown = sorted(set(table) - allowed)
        if unknown:
            where = f"[{section}]" if section else "the top level"
            raise UsageError(f"{path}: unknown key '{unknown[0]}' in {where} (known: {', '.join(sorted(allowed))})")
        for key, value in table.items():
            if (expected := SHAPES.get((section, key))) and not _has_shape(value, expected[0]):
                where = f"[{section}] {key}" if section else key
                raise UsageError(f"{path}: {where} must be {expected[1]}, got {value!r}")
    return study


def _has_shape(value: Any, shape: tuple) -> bool:
    """``shape``: the allowed kinds, among int, float, str, "strs" (list of str), "nums"
    (list of numbers), "table of int" and "table of strs"."""
    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    checks = {
        int: lambda v: isinstance(v, int) and not isinstance(v, bool),
        float: number,
        str: lambda v: isinstance(v, str),
        bool: lambda v: isinstance(v, bool),
        "strs": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
        "nums": lambda v: isinstance(v, list) and all(number(x) for x in v),
        "table of int": lambda v: isinstance(v, dict) and all(checks[int](x) for x in v.values()),
        "table of strs": lambda v: isinstance(v, dict) and all(checks["strs"](x) for x in v.values()),
    }
    return any(checks[kind](value) for kind in shape)


# What each study-file key may hold, and how to say it.
SHAPES: dict[tuple[str, str], tuple[tuple, str]] = {
    ("", "trials"): ((int,), "a whole number"),
    ("", "time_limit"): ((str, float), 'a duration like "10m" or a number of seconds'),
    ("", "noise"): ((float,), "a number like 0.05"),
    ("", "strategy"): ((str,), 'a string like "guided"'),
    ("", "slo"): (("strs",), 'a list like ["tpot_p99_ms<=40"]'),
    ("", "max_output_change"): ((float, int), "a share like 0.02"),
    ("", "allow_output_change"): ((bool,), "true or false"),
    ("", "near_tie_margin"): ((float, int), "a log-probability gap like 0.1"),
    ("space", "methods"): (("strs",), 'a list like ["ngram", "draft_model"]'),
    ("space", "k"): ((str, "nums", int), 'a string like "1-6" or a list like [1, 2, 4]'),
    ("space", "ngram_lookup"): (("strs",), 'a list like ["2-4"]'),
    ("space", "fixed_k"): (("table of int",), "a table like { dflash = 7 }"),
    ("space", "drafts"): (("table of strs",), 'a table like { draft_model = ["/models/draft"] }'),
    ("space", "adaptive_verification"): ((bool,), "true or false"),
    ("server", "cmd"): ((str,), 'a string like "vllm serve {model}"'),
    ("server", "args"): (("strs",), 'a list like ["--enforce-eager"]'),
    ("server", "deploy_args"): (("strs",), 'a list like ["--max-model-len=4096"]'),
    ("load", "mode"): ((str,), 'a string: "concurrency", "rate" or "trace"'),
    ("load", "concurrency"): ((int, "nums", str), "a number or a list like [1, 4, 16]"),
    ("load", "rate"): ((float, "nums", str), "a number or a list like [1, 4]"),
    ("load", "time_scale"): ((float,), "a number like 1.0"),
}


def _given(flag: Any, otherwise: Any) -> Any:
    """The flag's value where it was given (0 and "" included, to be checked), else ``otherwise``."""
    return flag if flag is not None else otherwise


def check_noise(noise: float) -> float:
    if not 0 <= noise < 1:
        raise UsageError(f"--noise must be a fraction from 0 to below 1, like 0.05, got {noise}")
    return noise


def _ks(value: Any) -> tuple[int, ...]:
    if isinstance(value, list):
        return parse_ks(",".join(str(v) for v in value))
    return parse_ks(str(value))


def build_request(
    study_file: Path | None = None, *, workload: str | Path, model: str, workload_type: str | None = None,
    name: str | None = None, db: str | None = None, run: RunSettings | None = None,
    methods: list[str] | None = None, drafts: list[str] | None = None,
    k: str | None = None, ngram_lookup: list[str] | None = None, load: str | None = None,
    concurrency: str | int | None = None, rate: str | float | None = None,
    time_scale: float | None = None, seed: int = 0, server_cmd: str | None = None,
    server_args: list[str] | None = None, trials: int | None = None, noise: float | None = None,
    strategy: str | None = None, slos: list[str] | None = None, warm_start: bool = True,
    deploy_args: list[str] | None = None, max_output_change: float | None = None,
    allow_output_change: bool | None = None, near_tie_margin: float | None = None,
    time_limit: str | None = None, adaptive_verification: bool | None = None,
) -> StudyRequest:
    """The one place a study is asked: flags win over the study file, the file over the defaults.
    Drafts are sorted by method and block sizes read from their checkpoints here, once."""
    study = load_study_file(study_file) if study_file else {}
    space_cfg, server_cfg, load_cfg = (study.get(x, {}) for x in ("space", "server", "load"))
    named = tuple(methods or space_cfg.get("methods") or ())
    by_method = drafts_by_method(named, drafts) if drafts else {
        m: tuple(d) for m, d in space_cfg.get("drafts", {}).items() if not named or m in named}
    # A --draft PATH whose method was not named adds the method its checkpoint is for.
    chosen = (*named, *(m for m in by_method if m not in named)) or ("ngram",)
    ks = parse_ks(k) if k is not None else _ks(space_cfg["k"]) if "k" in space_cfg else proposal_ks(by_method, DEFAULT_KS)
    space = Space(methods=chosen, ks=ks, drafts=by_method,
                  ngram_lookup=tuple(parse_lookup(x) for x in ngram_lookup or space_cfg.get("ngram_lookup") or ["2-4"]),
                  fixed_k=block_ks(by_method, dict(space_cfg.get("fixed_k", {}))),
                  adaptive_verification=_given(adaptive_verification, space_cfg.get("adaptive_verification", False)))
    rates = _given(rate, load_cfg.get("rate"))
    mode = load or load_cfg.get("mode", "concurrency")
    if mode not in ("concurrency", "rate", "trace"):
        raise UsageError(f"--load must be concurrency, rate or trace, got {mode!r}")
    loads = Loads(mode=mode,
                  concurrency=parse_levels(_given(concurrency, load_cfg.get("concurrency", 1)), "concurrency"),
                  rate=parse_levels(rates, "rate", float) if rates is not None else None,
                  time_scale=_given(time_scale, load_cfg.get("time_scale", 1.0)))
    run = run or RunSettings()
    if run.acceptance_rates and allow_output_change is None:
        allow_output_change = True  # the synthetic sampler changes greedy output by design
    limit = _given(time_limit, study.get("time_limit"))
    rules = Rules(
        trials=_given(trials, study.get("trials", 20)), seed=seed,
        time_limit_s=parse_time_limit(limit) if limit is not None else None,
        noise=check_noise(_given(noise, study.get("noise", DEFAULT_NOISE))),
        strategy=strategy or study.get("strategy", "guided"),
        slos=tuple(s.text for s in parse_slos(slos or study.get("slo", []))), warm_start=warm_start,
        max_output_change=float(_given(max_output_change, study.get("max_output_change", 0.0))),
        allow_output_change=bool(_given(allow_output_change, study.get("allow_output_change", False))),
        near_tie_margin=float(_given(near_tie_margin, study.get("near_tie_margin", NEAR_TIE_MARGIN))))
    server = Server(cmd=server_cmd or server_cfg.get("cmd"), args=tuple(server_args or server_cfg.get("args", [])),
                    deploy_args=tuple(deploy_args or server_cfg.get("deploy_args", [])))
    if run.log_dir is not None:
        run = run.model_copy(update={"log_dir": run.log_dir.absolute()})
    request = StudyRequest(workload=str(Path(workload).absolute()), workload_type=workload_type, model=model,
                           space=space, loads=loads, server=server, rules=rules, run=run, name=name,
                           db=database_url(db))
    study_plan(request)  # refuses what cannot be planned (a load without its rate, a bad strategy) now
    return request


def study_plan(request: StudyRequest, join: bool = False) -> StudyPlan:
    """What the study loop runs, from the request; ``join``: this process joins others' study."""
    return StudyPlan(request.space.search_space(), request.load_specs(), request.server.cmd,
                     request.server.all_args, request.settings(join))


def plan_study(study_file: Path | None = None, **flags: Any) -> StudyPlan:
    """The plan of a study file and flags alone, for a model and workload that do not matter
    (the tests and the reference pages read it)."""
    return study_plan(build_request(study_file, workload="workload.jsonl", model="model", **flags))


def measure_settings(run: RunSettings, loads: Sequence[LoadSpec], server_cmd: str | None,
                     server_args: Sequence[str], gpus: tuple[int, ...] | None = None,
                     gpu_free_timeout: float = ServerOptions.gpu_free_timeout_s) -> MeasureSettings:
    """The one place a command's flags become MeasureSettings and the ServerOptions in them.
    ``loads``: replayed in order on each server; ``gpus``: this process's (None: the host's)."""
    if run.acceptance_rates:
        check_synthetic_acceptance()  # before any server starts: the CPU build's engine dies of it
    return MeasureSettings(
        load=loads[0], extra_loads=tuple(loads[1:]), warmup=run.warmup,
        warmup_until_steady=run.warmup_until_steady, repeats=run.repeats,
        max_repeats=run.max_repeats, precision=run.precision, requests_per_client=run.requests_per_client,
        repeat_mode=run.repeat_mode, request_timeout_s=run.request_timeout,
        default_max_tokens=run.max_tokens, retries=run.retries, retry_wait_s=run.retry_wait,
        server=ServerOptions(server_cmd=server_cmd, server_args=list(server_args),
                             start_timeout_s=run.start_timeout, download_timeout_s=run.download_timeout,
                             log_dir=run.logs, gpus=gpus, gpu_free_timeout_s=gpu_free_timeout,
                             synthetic_acceptance=run.acceptance_rates,
                             per_request_acceptance=per_request_spec_metrics()),
    )


def check_request(request: StudyRequest) -> Workload:
    """Everything a study will need that can be checked before it runs, for a launcher that runs
    it later or elsewhere (a schedule, the dashboard): the workload's lines (FILE:LINE), the
    measuring settings, the target and the drafts (warnings are for the run to show). Raises
    UsageError; returns the workload."""
    workload = load_workload(request.workload, request.workload_type)
    plan = study_plan(request)
    measure_settings(request.run, plan.loads, plan.server_cmd, plan.server_args)
    check_space(plan.space, request.model)
    return workload
