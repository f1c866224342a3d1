"""The commands that measure: `tuner measure` (one configuration), `tuner optimize` (a study),
`tuner worker` (joins one), `tuner run-request` (a stored request: jobs and dashboard runs), and
`tuner best` (the answers in the database)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Optional

import typer

from tuner.cli.app import app, user_errors
from tuner.cli.options import (
    NOISE, STUDY_OPTIONS, RUN_OPTIONS_WITH_DEFAULTS, SYNTHETIC_NOTE, DbOpt, FormatOpt, GpuFreeTimeoutOpt,
    GpusOpt, HeartbeatOpt, JsonOpt, LoadOpt, ModelOpt, RateOpt, ServerArgOpt, ServerCmdOpt, TimeScaleOpt,
    TypeOpt, WorkersOpt, WorkloadOpt, WriteConfigOpt, gathered, run_settings, study_request)
from tuner.engine import SpecConfig
from tuner.errors import UsageError
from tuner.outputs import Output, chosen_format, err_console
from tuner.outputs.report import (MeasureProgress, StudyProgressView, measurement_table, optimize_report,
                                  outcome_dict, verdict_dict, verdict_text)
from tuner.plan.request import RunSettings, StudyRequest
from tuner.replay import LoadSpec

STUDY_INTERRUPTED = ("the vLLM server was stopped; finished trials are stored, and the same command "
                     "resumes the study")


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
@gathered("run", RUN_OPTIONS_WITH_DEFAULTS, run_settings)
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
    server_cmd: ServerCmdOpt = None,
    server_arg: ServerArgOpt = None,
    fmt: FormatOpt = None,
    as_json: JsonOpt = False,
    *, run: RunSettings,
) -> None:
    """Measure one speculative configuration (or the baseline) on a fresh vLLM server."""
    from tuner.measure.trial import measure_config
    from tuner.plan.checks import check_config, check_loads
    from tuner.plan.study_plan import measure_settings
    from tuner.workload import load_workload

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


def write_speculative_config(verdict, path: Path | None) -> str | None:
    """The file form of the answer; nothing is written when speculation stays off."""
    if path is None or verdict.config_json() is None:
        return None
    try:
        path.write_text(verdict.config_json())
    except OSError as exc:
        raise UsageError(f"cannot write {path} ({exc.strerror}); pass another --write-config path") from None
    return str(path)


def report(note: str) -> None:
    err_console.print(note, highlight=False, soft_wrap=True)


def show_study(out: Output, run: Callable, write_config: Path | None, shared: bool) -> None:
    """Run a study (``run(progress)``: a StudyResult) under the progress view, then print its answer."""
    with StudyProgressView(err_console) as progress:
        result = run(progress)
    written = write_speculative_config(result.outcome.verdict, write_config)
    out.result(lambda: outcome_dict(result.outcome),
               lambda: optimize_report(result.outcome, result.rows, result.candidates, shared, written))


@app.command()
@gathered("request", STUDY_OPTIONS, study_request)
def optimize(
    fmt: FormatOpt = None,
    as_json: JsonOpt = False,
    workers: WorkersOpt = 1,
    gpus: GpusOpt = None,
    gpu_free_timeout: GpuFreeTimeoutOpt = 120.0,
    heartbeat: HeartbeatOpt = 30,
    write_config: WriteConfigOpt = None,
    *, request: StudyRequest,
) -> None:
    """Search (method, draft, k) with an Optuna study; every trial is a real measurement."""
    began = time.monotonic()  # --time-limit counts from here: the checks before the study take seconds
    from tuner.study.run import Placement, run_study

    with user_errors(STUDY_INTERRUPTED):
        out = Output(chosen_format(fmt, as_json))
        place = Placement(workers=workers, gpus=gpus, heartbeat=heartbeat, gpu_free_timeout=gpu_free_timeout)
        show_study(out, lambda progress: run_study(request, place, report=report, progress=progress, began=began),
                   write_config, shared=workers > 1)


@app.command()
def worker(
    study: Annotated[str, typer.Option(help="Name of the study to join (as `tuner optimize` named it).")],
    db: Annotated[str, typer.Option(help="The study's database: PostgreSQL, shared by every worker.")],
    gpus: GpusOpt = None,
    gpu_free_timeout: GpuFreeTimeoutOpt = 120.0,
    heartbeat: HeartbeatOpt = 30,
) -> None:
    """Join a study started by `tuner optimize`: measure its next trials until it is done."""
    from tuner.study.run import Placement, join_study

    with user_errors(STUDY_INTERRUPTED):
        place = Placement(gpus=gpus, heartbeat=heartbeat, gpu_free_timeout=gpu_free_timeout, join=True)
        show_study(Output(chosen_format(None, False)),
                   lambda progress: join_study(study, db, place, report=report, progress=progress),
                   None, shared=True)


@app.command("run-request", hidden=True)
def run_request(
    path: Annotated[Path, typer.Argument(help="A study request as JSON, written by `tuner serve` or the dashboard.")],
    gpus: GpusOpt = None,
) -> None:
    """Run a stored study request: what `tuner serve`'s jobs and the dashboard's runs start."""
    from tuner.study.run import Placement, read_request_file, run_study

    with user_errors(STUDY_INTERRUPTED):
        request = read_request_file(path)
        show_study(Output(chosen_format(None, False)),
                   lambda progress: run_study(request, Placement(gpus=gpus), report=report, progress=progress),
                   None, shared=False)


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
