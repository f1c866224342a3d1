"""Every option, declared once: the option types, the parsers that check a value while Typer
parses it, and the tables of options a command takes as one object: ``RUN_OPTIONS`` make a
``RunSettings`` (`tuner measure`, `tuner optimize`, `tuner schedule add`), ``STUDY_OPTIONS`` a
``StudyRequest`` (tuner/plan/request.py) through ``build_request``, the one place flags and a
study file become a study. Defaults of the run options are ``RunSettings``'s own."""

from __future__ import annotations

import functools
import inspect
import math
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from tuner.cli.app import user_errors
from tuner.engine.gpus import parse_gpus
from tuner.errors import UsageError
from tuner.outputs import Format
from tuner.plan.request import RunSettings, StudyRequest
from tuner.plan.study_plan import build_request

def number(*, at_least: float | None = None, above: float | None = None,
           below: float | None = None) -> Callable[[str], float]:
    """The parser of a float option: a finite number within its bounds (Typer's min and max
    are inclusive only, and let inf through)."""
    bounds = " and ".join([*([f">= {at_least:g}"] if at_least is not None else []),
                           *([f"> {above:g}"] if above is not None else []),
                           *([f"< {below:g}"] if below is not None else [])])

    def parse(text: str) -> float:
        try:
            value = float(text)
        except (TypeError, ValueError):
            value = math.nan
        if not (math.isfinite(value) and (at_least is None or value >= at_least)
                and (above is None or value > above) and (below is None or value < below)):
            raise typer.BadParameter(f"must be a number {bounds}, got {text!r}")
        return value
    return parse


POSITIVE, NON_NEGATIVE = number(above=0), number(at_least=0)
NOISE = number(at_least=0, below=1)


def _checked(check: Callable, value):
    """Runs one of the tuner's checks on an option's value while Typer parses it: a refusal is
    Typer's, so it comes before anything else is done."""
    try:
        return check(value)
    except UsageError as exc:
        raise typer.BadParameter(str(exc)) from None


def check_gpus(text: str | None) -> str | None:
    parse_gpus(text)
    return text


def check_output_file(path: Path | None) -> Path | None:
    """A file the command writes at its end: refused now if it could not be written then."""
    if path is not None and (path.is_dir() or not path.parent.is_dir()):
        raise UsageError(f"{path} is a folder; name a file in it" if path.is_dir() else
                         f"the folder {path.parent} does not exist; create it or name a file in another")
    return path

# Options shared by the commands that run servers.
WorkloadOpt = Annotated[Path, typer.Option(help="JSONL workload to replay.")]
ModelOpt = Annotated[str, typer.Option(help="Target model (path or hub name) for vLLM.")]
TypeOpt = Annotated[Optional[str], typer.Option("--type", help="Workload type; default: the file name stem.")]
WarmupOpt = Annotated[int, typer.Option(help="Requests sent first and not measured.")]
WarmupUntilSteadyOpt = Annotated[bool, typer.Option(
    help="Then replay the load's requests, not measured, until the tokens/s stops rising (at most "
         "6 replays): a fresh GPU server can speed up over its first minute of load.")]
RepeatsOpt = Annotated[int, typer.Option(
    help="Replays of the workload per configuration; figures are the median, with MAD and a "
         "bootstrap interval.")]
MaxRepeatsOpt = Annotated[Optional[int], typer.Option(
    help="Replay on past --repeats, on the same server, until the tokens/s is known to "
         "--precision, or this many replays; off by default (exactly --repeats).")]
RequestsPerClientOpt = Annotated[Optional[int], typer.Option(
    help="At concurrency c, replay the workload's first c x N requests (all of them when fewer), "
         "so a replay at 1 is as short as one at 32; default: the whole workload at every load.")]
PrecisionOpt = Annotated[float, typer.Option(
    help="With --max-repeats: half the 95 % interval of a trial's tokens/s, relative, that ends "
         "its replays (0.02: +-2 %); the precision reached is stored.")]
RepeatModeOpt = Annotated[str, typer.Option(
    help="same-server (prefix cache reset between replays) or fresh-server (a restart per replay).")]
MaxTokensOpt = Annotated[int, typer.Option(
    min=1, help="Output length for requests that give neither max_tokens nor output_tokens.")]
RequestTimeoutOpt = Annotated[float, typer.Option(
    parser=POSITIVE, help="Seconds before a request counts as failed.")]
ServerCmdOpt = Annotated[Optional[str], typer.Option(
    help="Server command template with {model}; default 'vllm serve {model}' (env TUNER_SERVER_CMD).")]
ServerArgOpt = Annotated[Optional[list[str]], typer.Option(
    help="Extra server argument, repeatable: --server-arg=--max-model-len=1024.")]
StartTimeoutOpt = Annotated[float, typer.Option(parser=POSITIVE, help="Seconds to wait for /health.")]
DownloadTimeoutOpt = Annotated[float, typer.Option(
    parser=NON_NEGATIVE,
    help="Seconds a first start may spend downloading the model from the hub, on top of --start-timeout.")]
RetriesOpt = Annotated[int, typer.Option(
    help="Tries again after a fault of the host, not the config (a port taken, GPU memory not "
         "freed, a download, a slow /metrics); still failing, the trial is stored as not "
         "measured and the next run measures it.")]
RetryWaitOpt = Annotated[float, typer.Option(
    parser=NON_NEGATIVE, help="Seconds before the first retry; doubles with each.")]
LogDirOpt = Annotated[Optional[Path], typer.Option(file_okay=False, help="Where server logs go (default .tuner/logs).")]
RateOpt = Annotated[Optional[float], typer.Option(parser=POSITIVE, help="Requests per second for --load rate.")]
# Optional, so that optimize can tell "not given" (the study file's value) from a flag.
LoadOpt = Annotated[Optional[str], typer.Option(help="concurrency (closed loop), rate (Poisson) or trace.")]
TimeScaleOpt = Annotated[Optional[float], typer.Option(
    parser=POSITIVE, help="Multiplies captured gaps for --load trace.")]
GpusOpt = Annotated[Optional[str], typer.Option(
    callback=lambda text: _checked(check_gpus, text),
    help="GPUs this command owns, like 0,1 (CUDA_VISIBLE_DEVICES of its servers; with --workers "
         "they are split between the workers). Default: the host's.")]
GpuFreeTimeoutOpt = Annotated[float, typer.Option(
    parser=NON_NEGATIVE,
    help="Seconds to wait for the previous server's GPU memory to be released before a start.")]
HeartbeatOpt = Annotated[int, typer.Option(
    min=1, help="Seconds between a running trial's heartbeats; after three missed ones another worker "
         "reruns the trial.")]
DbOpt = Annotated[Optional[str], typer.Option(
    help="Results database URL (env TUNER_DB; default sqlite:///tuner.db).")]
SyntheticOpt = Annotated[Optional[str], typer.Option(
    help="What-if acceptance, like 0.74,0.54,0.41,0.31: vLLM's synthetic sampler accepts the first "
         "i+1 drafts with the i-th chance whatever the draft guessed, so the figures are this "
         "host's real step costs at that profile (and greedy output changes by design).")]
SYNTHETIC_NOTE = ("note: acceptance was synthetic ({rates}): these figures are this host's step costs "
                  "at that profile, not what the draft itself would reach; measure again without "
                  "--synthetic-acceptance before deploying")
FormatOpt = Annotated[Optional[Format], typer.Option(
    "--format", help="table (default) or json: one JSON document on stdout, notes on stderr.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Same as --format json.")]
WriteConfigOpt = Annotated[Optional[Path], typer.Option(
    callback=lambda path: _checked(check_output_file, path),
    help="Write the answer's speculative config to this JSON file (speculative-config.json); "
         "vllm serve takes it as --speculative-config \"$(cat FILE)\".")]


MethodOpt = Annotated[Optional[list[str]], typer.Option(
    help="Method to try, repeatable (default: ngram). The baseline is always measured.")]
DraftOpt = Annotated[Optional[list[str]], typer.Option(
    help="Draft checkpoint, repeatable: PATH (for the one method taking drafts) or METHOD=PATH.")]
KRangeOpt = Annotated[Optional[str], typer.Option("--k", help="k values: 1-8 or 2,4,6 (default 1-5).")]
NgramLookupOpt = Annotated[Optional[list[str]], typer.Option(
    help="ngram prompt_lookup MIN-MAX, repeatable (default 2-4).")]
AdaptiveVerificationOpt = Annotated[Optional[bool], typer.Option(
    "--adaptive-verification", help="Also try each drafter with vLLM's adaptive verification "
    "(enable_adaptive_verification: vLLM sizes each request's verified drafts, up to k, from the "
    "drafter's confidence), beside its fixed k at the same loads.")]
StudyFileOpt = Annotated[Optional[Path], typer.Option(
    "--study", help="TOML study file with the space, server args and load (flags override it).")]
TrialsOpt = Annotated[Optional[int], typer.Option(
    help="Server starts: configurations to measure, baseline included, and with --max-repeats the "
         "second starts that settle an undecided pair (default 20).")]
TimeLimitOpt = Annotated[Optional[str], typer.Option(
    help="An answer by then (600, 10m, 1h): no server start whose trial would end later, judged "
         "by the longest trial so far; the answer is the best measured, and the same command "
         "goes on with the study.")]
NoiseOpt = Annotated[Optional[float], typer.Option(
    parser=NOISE, help="A winner must beat the baseline by more than this fraction (default 0.05).")]
SeedOpt = Annotated[int, typer.Option(min=0, help="Seed of the sampler and of Poisson arrivals.")]
ConcurrencyLevelsOpt = Annotated[Optional[str], typer.Option(
    "--concurrency", help="Clients in the closed loop (default 1); several levels, like 1,4,16,64, "
    "give a k per batch size.")]
RateLevelsOpt = Annotated[Optional[str], typer.Option(
    "--rate", help="Requests per second for --load rate; several, like 1,4, measure each.")]
StrategyOpt = Annotated[Optional[str], typer.Option(
    help="guided (default: step-cost model, fewest restarts), tpe, or grid.")]
SloOpt = Annotated[Optional[list[str]], typer.Option(
    help='Latency target, repeatable: "tpot_p99_ms<=40", "ttft_p99_ms<=500".')]
WarmStartOpt = Annotated[bool, typer.Option(
    help="Start a new study from the previous best of this model and workload type.")]
NameOpt = Annotated[Optional[str], typer.Option(
    help="Study name (default 'MODEL | TYPE | LOAD'; the same name resumes the study, a new "
         "one, such as a nightly date, starts a warm-started study).")]
DeployArgOpt = Annotated[Optional[list[str]], typer.Option(
    help="Server argument for the trials that production uses too, repeatable: kept in the "
         "answer's `vllm serve` line, where tuning-only ones (--enforce-eager, --load-format, "
         "--max-model-len) are dropped.")]
MaxOutputChangeOpt = Annotated[Optional[float], typer.Option(
    help="Share of greedy requests a config may change against the baseline and still be "
         "chosen (default 0; GPUs may flip near-ties).")]
AllowOutputChangeOpt = Annotated[Optional[bool], typer.Option(
    "--allow-output-change", help="Choose a config even if it changed greedy output (warned).")]
NearTieMarginOpt = Annotated[Optional[float], typer.Option(
    parser=NON_NEGATIVE, help="A greedy output that leaves the baseline's where the baseline's top "
    "two candidates were closer than this in log-probability is a numeric near-tie, not a change "
    "(default 0.1; 0 counts every divergence).")]
WorkersOpt = Annotated[int, typer.Option(
    help="Processes measuring the study at once on this host (each with its own server); more "
         "than one needs PostgreSQL (--db postgresql://...). `tuner worker` joins from other hosts.")]


def _run_default(name: str) -> Any:
    return RunSettings.model_fields[name].default


# How each configuration is measured, in --help order: RunSettings's fields, with its defaults.
RUN_OPTIONS = (
    ("warmup", WarmupOpt), ("warmup_until_steady", WarmupUntilSteadyOpt), ("repeats", RepeatsOpt),
    ("max_repeats", MaxRepeatsOpt), ("precision", PrecisionOpt), ("requests_per_client", RequestsPerClientOpt),
    ("repeat_mode", RepeatModeOpt), ("max_tokens", MaxTokensOpt), ("request_timeout", RequestTimeoutOpt),
    ("start_timeout", StartTimeoutOpt), ("download_timeout", DownloadTimeoutOpt), ("retries", RetriesOpt),
    ("retry_wait", RetryWaitOpt), ("log_dir", LogDirOpt), ("synthetic_acceptance", SyntheticOpt),
)
RUN_OPTIONS_WITH_DEFAULTS = tuple((name, kind, _run_default(name)) for name, kind in RUN_OPTIONS)

# What a study asks (StudyRequest), in --help order; then the run options.
STUDY_OPTIONS = (
    ("workload", WorkloadOpt, inspect.Parameter.empty), ("model", ModelOpt, inspect.Parameter.empty),
    ("workload_type", TypeOpt, None), ("method", MethodOpt, None), ("draft", DraftOpt, None),
    ("k", KRangeOpt, None), ("ngram_lookup", NgramLookupOpt, None),
    ("adaptive_verification", AdaptiveVerificationOpt, None), ("study_file", StudyFileOpt, None),
    ("trials", TrialsOpt, None), ("time_limit", TimeLimitOpt, None), ("noise", NoiseOpt, None),
    ("seed", SeedOpt, 0), ("db", DbOpt, None), ("load", LoadOpt, None),
    ("concurrency", ConcurrencyLevelsOpt, None), ("rate", RateLevelsOpt, None),
    ("time_scale", TimeScaleOpt, None), ("strategy", StrategyOpt, None), ("slo", SloOpt, None),
    ("warm_start", WarmStartOpt, True), ("name", NameOpt, None), ("deploy_arg", DeployArgOpt, None),
    ("max_output_change", MaxOutputChangeOpt, None), ("allow_output_change", AllowOutputChangeOpt, None),
    ("near_tie_margin", NearTieMarginOpt, None), ("server_cmd", ServerCmdOpt, None),
    ("server_arg", ServerArgOpt, None), *RUN_OPTIONS_WITH_DEFAULTS,
)
# The flags build_request names otherwise.
REQUEST_NAMES = {"method": "methods", "draft": "drafts", "server_arg": "server_args", "slo": "slos",
                 "deploy_arg": "deploy_args"}


def run_settings(**flags: Any) -> RunSettings:
    return RunSettings(**flags)


def study_request(**flags: Any) -> StudyRequest:
    """The flags of STUDY_OPTIONS -> the study they ask (build_request reads the study file)."""
    run = RunSettings(**{name: flags.pop(name) for name, _ in RUN_OPTIONS})
    study_file = flags.pop("study_file")
    return build_request(study_file, run=run, **{REQUEST_NAMES.get(k, k): v for k, v in flags.items()})


def gathered(param: str, options: Sequence[tuple[str, Any, Any]], build: Callable[..., Any]):
    """Gives a command ``options`` (placed before its --format, where Typer lists them) and calls
    it with ``param=build(**their values)``; a refusal of ``build`` is one sentence, exit 2."""
    def decorate(command: Callable) -> Callable:
        hints = typing.get_type_hints(command, include_extras=True)
        keyword = inspect.Parameter.KEYWORD_ONLY
        own = [p.replace(kind=keyword, annotation=hints[p.name])
               for p in inspect.signature(command).parameters.values() if p.name != param]
        at = next((i for i, p in enumerate(own) if p.name == "fmt"), len(own))
        added = [inspect.Parameter(name, keyword, annotation=kind, default=default)
                 for name, kind, default in options]
        names = [name for name, _, _ in options]

        @functools.wraps(command)
        def with_options(**given: Any) -> Any:
            with user_errors():
                built = build(**{name: given.pop(name) for name in names})
            return command(**given, **{param: built})

        with_options.__signature__ = inspect.Signature([*own[:at], *added, *own[at:]])  # type: ignore[attr-defined]
        with_options.__annotations__ = {p.name: p.annotation for p in with_options.__signature__.parameters.values()}
        return with_options
    return decorate
