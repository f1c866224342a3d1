"""The ``tuner`` command: parse options, call one function, print the result."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import math
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.markup import escape

from tuner.engine import SpecConfig
from tuner.engine.gpus import parse_gpus
from tuner.errors import TunerError, UsageError
from tuner.replay import LoadSpec
from tuner.schedule.config import serve_options
from tuner.outputs import Format, Output, chosen_format, console, err_console
from tuner.outputs.report import (MeasureProgress, StudyProgressView, measurement_table, optimize_report,
                                  outcome_dict, verdict_dict, verdict_text)
from tuner.measure.trial import measure_config
from tuner.workload import load_workload

if TYPE_CHECKING:
    from tuner.plan.study_plan import RunOptions


class OneLineErrors(typer.core.TyperGroup):
    """Typer's own refusals of an option (a value of the wrong kind or out of range, a missing
    option) in the tuner's form: `error:` and one sentence, exit code 2, instead of usage text and
    a panel. The subcommands' options are parsed inside the group's invoke."""

    def make_context(self, *args, **kwargs):
        with _one_line_usage_errors():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx):
        with _one_line_usage_errors():
            return super().invoke(ctx)


@contextlib.contextmanager
def _one_line_usage_errors() -> Iterator[None]:
    try:
        yield
    except typer.TyperException as exc:
        if exc.exit_code != 2 or type(exc).__name__ == "NoArgsIsHelpError":  # that one shows the help
            raise
        ctx = getattr(exc, "ctx", None)
        where = ctx.command_path if ctx is not None else "tuner"
        message = " ".join(exc.format_message().split()).rstrip(".")
        err_console.print("[bold red]error:[/]", escape(f"{message}; see `{where} --help`"),
                          highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


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

db_app = typer.Typer(help="The results database.", no_args_is_help=True)

app = typer.Typer(
    help="Find the fastest vLLM speculative-decoding configuration for your model and traffic.",
    no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False, cls=OneLineErrors,
)


workload_app = typer.Typer(help="Workload files: import, inspect, sample, split.", no_args_is_help=True)
schedule_app = typer.Typer(help="Recurring tuning jobs, run by `tuner serve`.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(workload_app, name="workload")
app.add_typer(schedule_app, name="schedule")


@app.callback()
def _root() -> None:
    """Measure and tune vLLM speculative decoding."""


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
LogDirOpt = Annotated[Path, typer.Option(file_okay=False, help="Where server logs go.")]
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


# The options `tuner measure` and `tuner optimize` share, defined once, in --help order.
SHARED_RUN_OPTIONS = (
    ("warmup", WarmupOpt, 2), ("warmup_until_steady", WarmupUntilSteadyOpt, False), ("repeats", RepeatsOpt, 1), ("max_repeats", MaxRepeatsOpt, None),
    ("precision", PrecisionOpt, 0.02), ("requests_per_client", RequestsPerClientOpt, None),
    ("repeat_mode", RepeatModeOpt, "same-server"),
    ("max_tokens", MaxTokensOpt, 128), ("request_timeout", RequestTimeoutOpt, 600.0),
    ("server_cmd", ServerCmdOpt, None), ("server_arg", ServerArgOpt, None),
    ("start_timeout", StartTimeoutOpt, 900.0), ("download_timeout", DownloadTimeoutOpt, 3600.0),
    ("retries", RetriesOpt, 1), ("retry_wait", RetryWaitOpt, 30.0),
    ("log_dir", LogDirOpt, Path(".tuner/logs")),
)


def takes_run_options(command):
    """Gives a command the shared options (placed before its --format, where Typer lists them) and
    calls it with ``run``, one RunOptions of every RunOptions field among its options; the shared
    options that are no RunOptions field (the server command and arguments) stay keywords."""
    shared = {name for name, _, _ in SHARED_RUN_OPTIONS}
    keyword = inspect.Parameter.KEYWORD_ONLY
    own = [p.replace(kind=keyword, annotation=eval(p.annotation, command.__globals__)
                     if isinstance(p.annotation, str) else p.annotation)
           for p in inspect.signature(command).parameters.values() if p.name != "run" and p.name not in shared]
    at = next(i for i, p in enumerate(own) if p.name == "fmt")
    added = [inspect.Parameter(name, keyword, annotation=kind, default=default)
             for name, kind, default in SHARED_RUN_OPTIONS]

    @functools.wraps(command)
    def with_run_options(**options):
        from tuner.plan.study_plan import RunOptions

        fields = [f.name for f in dataclasses.fields(RunOptions) if f.init and f.name in options]
        with user_errors():  # RunOptions refuses a malformed --synthetic-acceptance
            run = RunOptions(**{name: options.pop(name) for name in fields})
        return command(run=run, **options)

    with_run_options.__signature__ = inspect.Signature([*own[:at], *added, *own[at:]])
    with_run_options.__annotations__ = {p.name: p.annotation for p in with_run_options.__signature__.parameters.values()}
    return with_run_options


def write_speculative_config(verdict, path: Path | None) -> str | None:
    """The file form of the answer; nothing is written when speculation stays off."""
    if path is None or verdict.config_json() is None:
        return None
    try:
        path.write_text(verdict.config_json())
    except OSError as exc:
        raise UsageError(f"cannot write {path} ({exc.strerror}); pass another --write-config path") from None
    return str(path)


@contextlib.contextmanager
def user_errors(on_interrupt: str = "the vLLM server was stopped") -> Iterator[None]:
    """Turn the tuner's errors into one red sentence and an exit code; Ctrl-C into exit 130."""
    try:
        yield
    except TunerError as exc:
        err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt:
        err_console.print(f"[yellow]interrupted[/]: {on_interrupt}", highlight=False)
        raise typer.Exit(130) from None


def spec_from_options(spec: str | None, method: str | None, draft: str | None,
                      k: int | None) -> SpecConfig | None:
    """--spec JSON, or --method/--draft/--k, or neither (the no-speculation baseline)."""
    if spec is not None:
        if method or draft or k is not None:
            raise UsageError("give either --spec JSON or --method/--draft/--k, not both")
        return SpecConfig.from_json(spec)
    if method is None:
        if draft or k is not None:
            raise UsageError("--draft and --k need --method (e.g. --method draft_model)")
        return None
    if k is None:
        raise UsageError(f"--method {method} needs --k, the number of speculative tokens")
    return SpecConfig(method=method, num_speculative_tokens=k, draft_model=draft)


@app.command()
@takes_run_options
def measure(
    workload: WorkloadOpt,
    model: ModelOpt,
    workload_type: TypeOpt = None,
    spec: Annotated[Optional[str], typer.Option(
        help='Speculative config JSON as vLLM takes it, e.g. \'{"method":"ngram","num_speculative_tokens":4}\'.'
    )] = None,
    method: Annotated[Optional[str], typer.Option(help="ngram, draft_model, eagle3, mtp, ...")] = None,
    draft: Annotated[Optional[str], typer.Option(help="Draft checkpoint (path or hub name).")] = None,
    k: Annotated[Optional[int], typer.Option("--k", help="num_speculative_tokens.")] = None,
    load: LoadOpt = "concurrency",
    concurrency: Annotated[int, typer.Option(help="Clients in the closed loop.")] = 1,
    rate: RateOpt = None,
    time_scale: TimeScaleOpt = 1.0,
    seed: Annotated[int, typer.Option(min=0, help="Seed of the Poisson arrivals.")] = 0,
    fmt: FormatOpt = None,
    as_json: JsonOpt = False,
    synthetic_acceptance: SyntheticOpt = None,
    *, run: RunOptions, server_cmd: Optional[str], server_arg: Optional[list[str]],
) -> None:
    """Measure one speculative configuration (or the baseline) on a fresh vLLM server."""
    from tuner.plan.checks import check_config, check_loads
    from tuner.plan.study_plan import measure_settings

    with user_errors():
        out = Output(chosen_format(fmt, as_json))
        config = spec_from_options(spec, method, draft, k)
        for warning in check_config(config, model):
            out.note(warning)
        loaded = load_workload(workload, workload_type)
        load_spec = LoadSpec(load, concurrency, rate, time_scale, seed)  # type: ignore[arg-type]
        for warning in check_loads(len(loaded.requests), [load_spec]):
            out.note(warning)
        settings = measure_settings(run, [load_spec], server_cmd, server_arg or [])
        with MeasureProgress(err_console) as progress:
            result = measure_config(model, config, loaded, settings, progress)
        out.result(result.to_dict, lambda: [measurement_table(result)])
        if run.acceptance_rates and config is not None:
            out.note(SYNTHETIC_NOTE.format(rates=run.synthetic_acceptance))


@app.command()
@takes_run_options
def optimize(
    workload: WorkloadOpt,
    model: ModelOpt,
    workload_type: TypeOpt = None,
    method: Annotated[Optional[list[str]], typer.Option(
        help="Method to try, repeatable (default: ngram). The baseline is always measured.")] = None,
    draft: Annotated[Optional[list[str]], typer.Option(
        help="Draft checkpoint, repeatable: PATH (for the one method taking drafts) or METHOD=PATH.")] = None,
    k: Annotated[Optional[str], typer.Option("--k", help="k values: 1-8 or 2,4,6 (default 1-5).")] = None,
    ngram_lookup: Annotated[Optional[list[str]], typer.Option(
        help="ngram prompt_lookup MIN-MAX, repeatable (default 2-4).")] = None,
    study_file: Annotated[Optional[Path], typer.Option(
        "--study", help="TOML study file with the space, server args and load (flags override it).")] = None,
    trials: Annotated[Optional[int], typer.Option(help="Server starts: configurations to measure, baseline included, and with --max-repeats the second starts that settle an undecided pair (default 20).")] = None,
    time_limit: Annotated[Optional[str], typer.Option(
        help="An answer by then (600, 10m, 1h): no server start whose trial would end later, judged "
             "by the longest trial so far; the answer is the best measured, and the same command "
             "goes on with the study.")] = None,
    noise: Annotated[Optional[float], typer.Option(
        parser=NOISE, help="A winner must beat the baseline by more than this fraction (default 0.05).")] = None,
    seed: Annotated[int, typer.Option(min=0, help="Seed of the sampler and of Poisson arrivals.")] = 0,
    db: DbOpt = None,
    load: LoadOpt = None,
    concurrency: Annotated[Optional[str], typer.Option(
        help="Clients in the closed loop (default 1); several levels, like 1,4,16,64, give a k per "
             "batch size.")] = None,
    rate: Annotated[Optional[str], typer.Option(help="Requests per second for --load rate; "
                                                "several, like 1,4, measure each.")] = None,
    time_scale: TimeScaleOpt = None,
    strategy: Annotated[Optional[str], typer.Option(
        help="guided (default: step-cost model, fewest restarts), tpe, or grid.")] = None,
    slo: Annotated[Optional[list[str]], typer.Option(
        help='Latency target, repeatable: "tpot_p99_ms<=40", "ttft_p99_ms<=500".')] = None,
    warm_start: Annotated[bool, typer.Option(
        help="Start a new study from the previous best of this model and workload type.")] = True,
    name: Annotated[Optional[str], typer.Option(
        help="Study name (default 'MODEL | TYPE | LOAD'; the same name resumes the study, a new "
             "one, such as a nightly date, starts a warm-started study).")] = None,
    fmt: FormatOpt = None,
    as_json: JsonOpt = False,
    workers: Annotated[int, typer.Option(
        help="Processes measuring the study at once on this host (each with its own server); "
             "more than one needs PostgreSQL (--db postgresql://...). `tuner worker` joins from "
             "other hosts.")] = 1,
    gpus: GpusOpt = None,
    gpu_free_timeout: GpuFreeTimeoutOpt = 120.0,
    heartbeat: HeartbeatOpt = 30,
    join: Annotated[bool, typer.Option(hidden=True, help="Join a study others run (tuner worker).")] = False,
    deploy_arg: Annotated[Optional[list[str]], typer.Option(
        help="Server argument for the trials that production uses too, repeatable: kept in the "
             "answer's `vllm serve` line, where tuning-only ones (--enforce-eager, --load-format, "
             "--max-model-len) are dropped.")] = None,
    max_output_change: Annotated[Optional[float], typer.Option(
        help="Share of greedy requests a config may change against the baseline and still be "
             "chosen (default 0; GPUs may flip near-ties).")] = None,
    allow_output_change: Annotated[Optional[bool], typer.Option(
        "--allow-output-change", help="Choose a config even if it changed greedy output (warned).")] = None,
    near_tie_margin: Annotated[Optional[float], typer.Option(
        parser=NON_NEGATIVE, help="A greedy output that leaves the baseline's where the baseline's top two candidates "
             "were closer than this in log-probability is a numeric near-tie, not a change "
             "(default 0.1; 0 counts every divergence).")] = None,
    write_config: WriteConfigOpt = None,
    synthetic_acceptance: SyntheticOpt = None,
    *, run: RunOptions, server_cmd: Optional[str], server_arg: Optional[list[str]],
) -> None:
    """Search (method, draft, k) with an Optuna study; every trial is a real measurement."""
    began = time.monotonic()  # --time-limit counts from here: the checks before the study take seconds
    from tuner.study.loop import optimize as run_study
    from tuner.study.prepare import prepare_study
    from tuner.study.processes import helper_workers

    with user_errors("the vLLM server was stopped; finished trials are stored, "
                     "and the same command resumes the study"):
        out = Output(chosen_format(fmt, as_json))
        # What `tuner worker` replays to join: this command's own options.
        own_args = sys.argv[sys.argv.index("optimize") + 1:] if "optimize" in sys.argv else []
        study = prepare_study(
            workload, workload_type, model, run, db=db, workers=workers, gpus=gpus, heartbeat=heartbeat,
            command=own_args, cwd=os.getcwd(),
            report=lambda note: err_console.print(note, highlight=False, soft_wrap=True),
            study_file=study_file, methods=method, drafts=draft, k=k, ngram_lookup=ngram_lookup,
            load=load, concurrency=concurrency, rate=rate, time_scale=time_scale, seed=seed,
            server_cmd=server_cmd, server_args=server_arg, trials=trials, noise=noise, time_limit=time_limit,
            strategy=strategy, slos=slo, warm_start=warm_start, name=name, join=join,
            deploy_args=deploy_arg, max_output_change=max_output_change,
            allow_output_change=allow_output_change, near_tie_margin=near_tie_margin)
        plan, store = study.plan, study.store
        # The other local workers start once the study exists; leaving waits for their trials.
        with helper_workers(study.name, study.db_url, study.helper_gpus, heartbeat, run.gpu_free_timeout,
                            run.log_dir, report=lambda note: err_console.print(note, highlight=False)) as start_helpers, \
                StudyProgressView(err_console) as progress:
            outcome = run_study(model, study.workload, plan.space, study.settings, store, study.storage,
                                plan.options, progress, on_ready=start_helpers, began=began)
        rows = store.trials(study_name=outcome.study_name)
        written = write_speculative_config(outcome.verdict, write_config)
        out.result(lambda: outcome_dict(outcome),
                   lambda: optimize_report(outcome, rows, len(plan.space.candidates()), workers > 1 or join, written))


@app.command()
def best(
    model: Annotated[Optional[str], typer.Option(help="Only this model.")] = None,
    workload_type: Annotated[Optional[str], typer.Option("--workload-type", help="Only this workload type.")] = None,
    noise: Annotated[Optional[float], typer.Option(
        parser=NOISE, help="Noise margin a winner must beat; default: each study's own --noise (0.05 for a "
             "study that stored none).")] = None,
    db: DbOpt = None,
    fmt: FormatOpt = None,
    as_json: JsonOpt = False,
    write_config: WriteConfigOpt = None,
) -> None:
    """The best configuration per (model, workload type) across all studies in the database,
    under each study's own latency targets, output rule and noise margin."""
    from tuner.decide.verdict import best_from_store
    from tuner.store import Database

    with user_errors():
        store = Database.open(db, read_only=True).results
        found = best_from_store(store, model, workload_type, noise)
        if write_config is not None and len(found) != 1:
            raise UsageError(f"--write-config needs one answer, and {len(found)} match; "
                             "pick one with --model and --workload-type")
        written = write_speculative_config(found[0], write_config) if found else None
        out = Output(chosen_format(fmt, as_json))
        if not found and not out.json:
            out.note("no completed study matches; run `tuner optimize` first")
            raise typer.Exit(1)
        out.result(lambda: [verdict_dict(v) for v in found],
                   lambda: [f"{verdict_text(v, store.trials(study_name=v.study_name), written)}\n" for v in found])


@app.command()
def capture(
    upstream: Annotated[str, typer.Option(help="The OpenAI-compatible server to forward to, e.g. http://127.0.0.1:8000.")],
    out: Annotated[Path, typer.Option(help="Workload JSONL to write (started afresh).")],
    listen: Annotated[str, typer.Option(help="HOST:PORT the proxy listens on; point clients here.")] = "127.0.0.1:8100",
    sample: Annotated[float, typer.Option(help="Fraction of requests recorded (all are proxied).")] = 1.0,
    max_requests: Annotated[Optional[int], typer.Option(help="Stop after recording this many requests.")] = None,
    duration: Annotated[Optional[float], typer.Option(parser=POSITIVE, help="Stop after this many seconds.")] = None,
    redact: Annotated[Optional[list[str]], typer.Option(
        help="Regex whose matches in prompts are written as \\[redacted], repeatable.")] = None,
    workload_type: Annotated[Optional[str], typer.Option("--type", help="Workload type written on every line.")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the --sample draw.")] = 0,
) -> None:
    """Record live traffic: a reverse proxy that writes one workload line per request."""
    from tuner.workload.capture import (CaptureSettings, CaptureSummary, compile_redactions,
                                        parse_listen, run_capture)

    with user_errors():
        host, port = parse_listen(listen)
        settings = CaptureSettings(upstream=upstream, out=out, host=host, port=port, sample=sample,
                                   max_requests=max_requests, duration_s=duration,
                                   redact=compile_redactions(list(redact or [])),
                                   workload_type=workload_type, seed=seed)
        with err_console.status("starting the proxy") as status:
            def ready() -> None:
                status.update(f"proxying http://{host}:{port} -> {upstream}; recording to {out} "
                              f"(Ctrl-C to stop)")

            def recorded(summary: CaptureSummary) -> None:
                status.update(f"proxying http://{host}:{port} -> {upstream}; "
                              f"{summary.recorded} requests recorded to {out}")

            summary = run_capture(settings, on_ready=ready, on_record=recorded)
        skipped = ", ".join(f"{n} {reason}" for reason, n in summary.skipped.items()) or "none"
        err_console.print(f"stopped ({summary.stopped_by}): {summary.recorded} requests recorded to {out}, "
                          f"{summary.proxied} proxied; not recorded: {skipped}", highlight=False, soft_wrap=True)


@workload_app.command("import")
def workload_import(
    source: Annotated[Path, typer.Argument(help="The file to import (read only; nothing is downloaded).")],
    out: Annotated[Path, typer.Option(help="Workload JSONL to write; a folder when spec-bench splits by type.")],
    from_format: Annotated[str, typer.Option("--from", help="sharegpt, spec-bench, vllm-custom or openai-batch.")],
    workload_type: Annotated[Optional[str], typer.Option("--type", help="Workload type for every line.")] = None,
    tokenizer: Annotated[Optional[str], typer.Option(
        help="Local tokenizer folder: ShareGPT output lengths in tokens instead of characters / 4.")] = None,
) -> None:
    """Convert ShareGPT, Spec-Bench, vLLM custom or OpenAI batch files into workload JSONL."""
    from tuner.workload.importers import import_workload, write_imported

    with user_errors():
        groups = import_workload(from_format, source, workload_type, tokenizer,
                                 report=lambda note: err_console.print(note, highlight=False))
        for path, count in write_imported(groups, out).items():
            console.print(f"{path}: {count} requests", highlight=False)


# The default lives in tuner.workload.classify (DEFAULT_MIN_CONFIDENCE); typer needs a literal.
MinConfidenceOpt = Annotated[float, typer.Option(
    help="Below this probability of its best type, an unlabelled request goes to 'mixed' "
         "instead of a guess (0 turns that off; a line's own type always wins).")]


@workload_app.command("stats")
def workload_stats_command(
    path: Annotated[Path, typer.Argument(help="Workload JSONL.")],
    tokenizer: Annotated[Optional[str], typer.Option(
        help="Local tokenizer folder: prompt lengths in tokens instead of characters.")] = None,
    fmt: FormatOpt = None,
    as_json: JsonOpt = False,
    min_confidence: MinConfidenceOpt = 0.4,
) -> None:
    """Request count, guessed types, prompt and output lengths, arrival rate, chat vs completion."""
    from tuner.outputs.workload import stats_table
    from tuner.workload.stats import stats_dict, workload_stats

    with user_errors():
        out = Output(chosen_format(fmt, as_json))
        stats = workload_stats(load_workload(path), tokenizer, min_confidence)
        out.result(lambda: stats_dict(stats), lambda: [stats_table(stats)])


@workload_app.command("sample")
def workload_sample(
    path: Annotated[Path, typer.Argument(help="Workload JSONL.")],
    n: Annotated[int, typer.Option("--n", help="Requests in the sample.")],
    out: Annotated[Path, typer.Option(help="Where the sample is written.")],
    seed: Annotated[int, typer.Option(min=0, help="Same seed, same sample.")] = 0,
) -> None:
    """A smaller replay set with the file's length distribution and arrival pattern."""
    from tuner.workload import write_workload
    from tuner.workload.sample import sample_workload

    with user_errors():
        loaded = load_workload(path)
        count = write_workload(out, sample_workload(loaded, n, seed))
        console.print(f"{out}: {count} of {len(loaded)} requests", highlight=False)


@workload_app.command("split")
def workload_split(
    path: Annotated[Path, typer.Argument(help="Workload JSONL with mixed traffic.")],
    out: Annotated[Path, typer.Option(file_okay=False, help="Folder for one TYPE.jsonl per workload type.")],
    min_confidence: MinConfidenceOpt = 0.4,
) -> None:
    """Split traffic into code, chat, summarization, math, translation, rag, other and mixed."""
    from tuner.workload import write_workload
    from tuner.workload.classify import MIXED, check_min_confidence, split_workload

    with user_errors():
        check_min_confidence(min_confidence)
        groups = split_workload(load_workload(path), min_confidence)
        for workload_type, requests in groups.items():
            target = out / f"{workload_type}.jsonl"
            console.print(f"{target}: {write_workload(target, requests)} requests", highlight=False)
        unsure = len(groups.get(MIXED, ()))
        console.print(f"{unsure} of {sum(map(len, groups.values()))} requests went to {MIXED} "
                      f"(best type below confidence {min_confidence:g}); label them with a "
                      f"\"type\" field or the X-Workload-Type header", highlight=False)


@app.command()
def dashboard(
    host: Annotated[str, typer.Option(help="Address to bind; the default is only reachable from this machine.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8080,
    db: DbOpt = None,
    token: Annotated[Optional[str], typer.Option(
        envvar="TUNER_DASHBOARD_TOKEN", show_envvar=True,
        help="Operator token that allows starting tuning runs (POST /api/runs); without it the "
             "dashboard only reads.")] = None,
    optuna_dashboard: Annotated[Optional[str], typer.Option(
        help="URL of an optuna-dashboard on the same database, linked from every page.")] = None,
) -> None:
    """Web dashboard of the best configurations per model and workload type."""
    import uvicorn

    from tuner.web import create_app

    with user_errors():
        web_app = create_app(db, token, optuna_dashboard_url=optuna_dashboard)
        err_console.print(f"dashboard on http://{host}:{port} (Ctrl-C to stop)", highlight=False)
        uvicorn.run(web_app, host=host, port=port, log_level="warning")


# optimize's options that plan_study names otherwise (as optimize passes them to prepare_study).
PLAN_NAMES = {"method": "methods", "draft": "drafts", "server_arg": "server_args", "slo": "slos",
              "deploy_arg": "deploy_args"}


def _check_optimize_options(args: list[str]) -> None:
    """Check options as `tuner optimize` will, without running it: parsed, planned (k, loads,
    targets, time limit, ...), made into measuring settings, and the target's path checked."""
    from tuner.plan.checks import check_target
    from tuner.plan.study_plan import RunOptions, measure_settings, plan_study

    command = typer.main.get_command(app).commands["optimize"]
    try:
        params = command.make_context("tuner optimize", list(args)).params
    except typer.exceptions.TyperException as exc:  # Typer's (vendored) click parse errors
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        raise UsageError(f"tuner optimize would refuse these options: {message}") from None
    planned = inspect.signature(plan_study).parameters
    plan = plan_study(**{PLAN_NAMES.get(k, k): v for k, v in params.items() if PLAN_NAMES.get(k, k) in planned})
    run = RunOptions(**{f.name: params[f.name] for f in dataclasses.fields(RunOptions) if f.init and f.name in params})
    measure_settings(run, plan.loads, plan.server_cmd, plan.server_args)
    check_target(params["model"])


@app.command()
def worker(
    study: Annotated[str, typer.Option(help="Name of the study to join (as `tuner optimize` named it).")],
    db: Annotated[str, typer.Option(help="The study's database: PostgreSQL, shared by every worker.")],
    gpus: GpusOpt = None,
    gpu_free_timeout: GpuFreeTimeoutOpt = 120.0,
    heartbeat: HeartbeatOpt = 30,
) -> None:
    """Join a study started by `tuner optimize`: measure its next trials until it is done."""
    from tuner.study.processes import join_study

    with user_errors():
        join_study(study, db, gpus, gpu_free_timeout, heartbeat,
                   report=lambda note: err_console.print(note, highlight=False))


@schedule_app.command("add", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def schedule_add(
    ctx: typer.Context,
    name: Annotated[str, typer.Option(help="Name of the schedule (its studies are named after it).")],
    cron: Annotated[str, typer.Option(help='When: "0 2 * * *" is 02:00 daily; a sixth field gives seconds.')],
    workload: WorkloadOpt,
    model: ModelOpt,
    tz: Annotated[str, typer.Option("--tz", help="Time zone of the cron times.")] = "UTC",
    workload_type: TypeOpt = None,
    gpus: Annotated[Optional[str], typer.Option(
        help="GPUs of its jobs, like 0,1 (CUDA_VISIBLE_DEVICES); jobs on overlapping GPUs never "
             "run at once. Default: every GPU, shared with every other job.")] = None,
    live_model_name: Annotated[Optional[str], typer.Option(
        help="model_name label of this model on the production servers Prometheus scrapes "
             "(drift check); default: --model.")] = None,
    db: DbOpt = None,
) -> None:
    """Add a recurring tuning job. Options after these go to `tuner optimize` (e.g. --method ngram --k 1-6)."""
    from tuner.schedule.add import add_schedule
    from tuner.schedule.cron import next_time
    from tuner.store import Database

    with user_errors():
        row = add_schedule(lambda: Database.open(db).jobs, name=name, cron=cron, tz=tz,
                           workload=workload, model=model, workload_type=workload_type,
                           optimize_args=list(ctx.args), gpus=gpus, live_model_name=live_model_name,
                           check_options=_check_optimize_options)
        first = next_time(row.cron, row.timezone, row.created_at)
        console.print(f"schedule {row.name!r} added: first run {first.isoformat(timespec='seconds')} "
                      f"({row.timezone}), run by `tuner serve`", highlight=False, soft_wrap=True)


@schedule_app.command("list")
def schedule_list(
    db: DbOpt = None,
    fmt: FormatOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Schedules with their next run, and the latest jobs."""
    from tuner.outputs.report import schedules_table, jobs_table
    from tuner.schedule.views import schedule_views
    from tuner.store import Database

    with user_errors():
        jobs = Database.open(db, read_only=True).jobs
        views = schedule_views(jobs)
        out = Output(chosen_format(fmt, as_json))
        if not views and not out.json:
            out.note("no schedules; add one with `tuner schedule add`")
            return
        out.result(lambda: {"schedules": views, "jobs": [j.to_dict() for j in jobs.jobs(limit=50)]},
                   lambda: [schedules_table(views), jobs_table(jobs.jobs(limit=20))])


@schedule_app.command("remove")
def schedule_remove(name: Annotated[str, typer.Argument(help="Schedule name.")], db: DbOpt = None) -> None:
    """Remove a schedule and its queued jobs (finished jobs keep their record)."""
    from tuner.store import Database

    with user_errors():
        if not Database.open(db, create=False).jobs.remove_schedule(name):
            raise UsageError(f"no schedule named {name!r}; `tuner schedule list` shows them")
        console.print(f"schedule {name!r} removed", highlight=False)


@schedule_app.command("run-now")
def schedule_run_now(name: Annotated[str, typer.Argument(help="Schedule name.")], db: DbOpt = None) -> None:
    """Queue a run of the schedule now; `tuner serve` starts it once its GPUs are free."""
    from datetime import datetime, timezone

    from tuner.schedule.service import enqueue_run
    from tuner.store import Database

    with user_errors():
        jobs = Database.open(db, create=False).jobs
        schedule = jobs.schedule(name)
        if schedule is None:
            raise UsageError(f"no schedule named {name!r}; `tuner schedule list` shows them")
        if active := jobs.active_job(schedule.id):
            raise UsageError(f"job {active.id} of {name!r} is already {active.status}; "
                             "wait for it (`tuner schedule list`)")
        job = enqueue_run(jobs, schedule, "run-now", datetime.now(timezone.utc))
        console.print(f"queued job {job.id} (study {job.study_name!r}); a running `tuner serve` "
                      "starts it when its GPUs are free", highlight=False, soft_wrap=True)


@app.command()
@serve_options
def serve(**given: object) -> None:
    """Run scheduled and drift-triggered tuning jobs, and the dashboard, in one process."""
    import logging

    import uvicorn

    from tuner.schedule.config import ServeSettings
    from tuner.schedule.service import TuningService
    from tuner.store import Database
    from tuner.web import create_app

    with user_errors():
        settings = ServeSettings.load(given)  # flags over TUNER_* over the [serve] table
        database = Database.open(settings.db)  # creates or checks the schema before anything starts
        service = TuningService(settings, database)
        web_app = create_app(database.url, settings.token, service=service,
                             run_log_dir=settings.log_dir / "dashboard-runs")
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
        err_console.print(f"tuner serve: dashboard on http://{settings.host}:{settings.port}, "
                          f"database {database.url}" + (f", drift check against {settings.prometheus}"
                                                        if settings.prometheus else ""), highlight=False)
        # uvicorn turns SIGTERM and Ctrl-C into a graceful shutdown, which stops the service
        # (and a running job's server) in the app's lifespan.
        uvicorn.run(web_app, host=settings.host, port=settings.port, log_level="warning")


@db_app.command("upgrade")
def db_upgrade(db: Annotated[Optional[str], typer.Option(help="Results database URL.")] = None) -> None:
    """Create the results schema, or bring it up to date."""
    from tuner.store import database_url, upgrade

    with user_errors():
        url = database_url(db)
        upgrade(url)
        console.print(f"{url}: schema up to date")


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> None:
    # SIGTERM (a scheduler or `kill`) takes the same path as Ctrl-C, so the server is stopped.
    signal.signal(signal.SIGTERM, _raise_interrupt)
    # A job started in the background by a non-interactive shell inherits SIGINT ignored, and
    # Python then never raises KeyboardInterrupt: Ctrl-C (or a SIGINT from a test or a
    # scheduler) would be lost. Restore Python's own handler.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    _quiet_optuna()
    app()


def _quiet_optuna() -> None:
    """Our own progress says what Optuna's INFO lines and its 'experimental' notes would."""
    import warnings

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    # The tuner records running trials' heartbeats itself (tuner.study.workers.heartbeat).
    warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with Study.optimize")


if __name__ == "__main__":
    main()
