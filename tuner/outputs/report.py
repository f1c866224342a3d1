"""Rich output for the CLI: live progress while measuring and the summary table after."""

from __future__ import annotations


from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from tuner.replay import Percentiles, RequestResult
from tuner.decide.answer import Answer
from tuner.decide.answer import DEFAULT_NOISE
from tuner.decide.output_check import divergence_text
from tuner.decide.k_by_batch_size import k_by_batch_size_beats_single
from tuner.decide.verdict import Verdict, objective_by_trial, prediction_error as prediction_figures
from tuner.store import TrialRow
from tuner.measure.trial import Measurement
from tuner.decide.marks import latency_trusted


class MeasureProgress:
    """Implements tuner.measure.trial.Progress with a rich progress bar on stderr."""

    def __init__(self, console: Console):
        self._console = console
        self._progress = Progress(
            SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[failed]} failed"), TimeElapsedColumn(),
            console=console, transient=False,
        )
        self._task: int | None = None
        self._failed = 0

    def __enter__(self) -> MeasureProgress:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._progress.live.is_started:
            self._progress.stop()

    def _show(self) -> None:
        # Started on first use, so an error raised before any work prints alone.
        if not self._progress.live.is_started:
            self._progress.start()

    def phase(self, description: str) -> None:
        self._show()
        self._progress.log(description)

    def start_replay(self, description: str, total: int) -> None:
        self._show()
        self._failed = 0
        self._task = self._progress.add_task(description, total=total, failed=0)

    def request_done(self, result: RequestResult) -> None:
        if self._task is None:
            return
        self._failed += 0 if result.ok else 1
        self._progress.update(self._task, advance=1, failed=self._failed)


def _ms(stats: Percentiles | None, field: str) -> str:
    return "-" if stats is None else f"{getattr(stats, field) * 1000:.1f}"


def measurement_table(m: Measurement) -> Table:
    s = m.summary
    table = Table(title=f"{m.label} | {m.model} | {m.workload_type} ({s.requests} requests, {m.load})",
                  show_header=True, title_justify="left")
    table.add_column("figure")
    table.add_column("value", justify="right")
    tps = m.tokens_per_s
    if tps.n > 1:
        table.add_row(f"output tokens/s (median of {tps.n})",
                      f"{tps.median:.1f} ± {tps.mad:.1f} MAD, 95% CI {tps.ci_low:.1f}-{tps.ci_high:.1f}")
        table.add_row("output tokens/s per run", " ".join(f"{r.summary.output_tokens_per_s:.1f}" for r in m.runs))
        table.add_row("figures below", "from the median run (acceptance too)")
    else:
        table.add_row("output tokens/s", f"{s.output_tokens_per_s:.1f}")
    table.add_row("requests/s", f"{s.requests_per_s:.2f}")
    table.add_row("completed / failed", f"{s.completed} / {s.failed}")
    median_run = m.median_run
    table.add_row("output tokens (client / server)", f"{s.output_tokens} / {median_run.server_generation_tokens}")
    for name, stats in (("TTFT", s.ttft), ("TPOT", s.tpot), ("e2e", s.e2e)):
        table.add_row(f"{name} ms mean / p50 / p90 / p99",
                      " / ".join(_ms(stats, f) for f in ("mean", "p50", "p90", "p99")))
    if (server := median_run.server_latency) is not None:
        table.add_row("server-side mean TTFT / TPOT / e2e ms", " / ".join(
            "-" if v is None else f"{v * 1000:.1f}" for v in (server.ttft_mean_s, server.tpot_mean_s, server.e2e_mean_s)))
    if marks := m.marks():
        table.add_row("[yellow]marked[/]", ", ".join(marks))
    if median_run.remeasured:
        table.add_row("replayed again", "after: " + ", ".join(median_run.remeasured))
    a = m.acceptance
    if a is None:
        table.add_row("acceptance", "n/a (no speculation)" if m.spec is None else "no drafts")
    else:
        table.add_row("acceptance rate", f"{a.acceptance_rate:.3f}")
        table.add_row("mean acceptance length", f"{a.mean_acceptance_length:.3f}")
        table.add_row("per-position acceptance", " ".join(f"{p:.3f}" for p in a.per_position))
        table.add_row("drafts / draft tokens / accepted (/metrics)",
                      f"{a.drafts} / {a.draft_tokens} / {a.accepted_tokens}")
    if (per_request := median_run.request_acceptance) is not None and per_request.total is not None:
        total = per_request.total
        if m.spec is not None:
            if total.server_steps is not None:
                table.add_row("drafts / draft tokens / accepted (requests' own, vLLM)",
                              f"{total.server_steps} / {total.server_drafted} / {total.server_accepted}")
            table.add_row("decode steps / accepted (requests' streams)", f"{total.stream_steps} / {total.stream_accepted}")
            table.add_row("tokens per step by context length (steps)", "  ".join(
                f"{b['from']}-{b['to'] - 1}: {b['tokens_per_step']:.2f} ({b['steps']})" for b in per_request.by_context))
        if any(b.get("tokens_per_s") for b in per_request.by_context):
            table.add_row("decode tok/s per request by context length", "  ".join(
                f"{b['from']}-{b['to'] - 1}: {b['tokens_per_s']:.0f}" for b in per_request.by_context if b.get("tokens_per_s")))
    table.add_row("server start", f"{m.server.startup_s:.1f} s (vLLM {m.server.vllm_version or '?'})")
    table.add_row("server log", m.server.log_path)
    for error in s.errors:
        table.add_row("[red]error[/]", error)
    return table


class _ProgressWithTable(Progress):
    """A rich Progress that draws a table above its bars (rich's documented extension point)."""

    def __init__(self, *columns, table, **kwargs):
        self.table = table  # set first: Progress renders once while it initialises
        super().__init__(*columns, **kwargs)

    def get_renderables(self):
        if self.table.row_count:
            yield self.table
        yield self.make_tasks_table(self.tasks)


class StudyProgressView(MeasureProgress):
    """Progress of a study: the live table of finished trials, then the bars of the current one."""

    def __init__(self, console: Console):
        super().__init__(console)
        self._table = _finished_table()
        self._baseline: dict[str, float] = {}
        self._progress = _ProgressWithTable(*self._progress.columns, table=self._table,
                                            console=console, transient=False)

    def trial_started(self, number: int, label: str, done: int, budget: int) -> None:
        self._show()
        if number < 0:
            self._progress.log(f"[bold]measuring the k-by-batch-size schedule[/]: {label}")
        else:
            self._progress.log(f"[bold]trial {number}[/] ({done + 1}/{budget} at most): {label}")
        # Bars of finished trials are dropped: their figures are in the table.
        for task in list(self._progress.task_ids):
            self._progress.remove_task(task)

    def trial_finished(self, row: TrialRow) -> None:
        self._show()
        if row.config is None and row.tokens_per_s:
            self._baseline[row.load] = row.tokens_per_s
        # The prediction's error shows in the final table, once every load of the trial is in.
        _add_row(self._table, row, self._baseline.get(row.load), objective=0.0)
        if row.status == "complete":
            acc = f", acceptance length {row.mean_acceptance_length:.2f}" if row.mean_acceptance_length else ""
            self._progress.log(f"  [green]done[/] {row.label}: {row.tokens_per_s:.1f} tok/s{acc}")
        else:
            self._progress.log(f"  [red]{row.status}[/] {row.label}: {row.failure_cause}")


def _finished_table(title: str | None = None) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("#", "config", "load", "status", "tok/s", "predicted", "vs baseline", "TPOT p50/p99 ms",
                   "acc. length", "per position", "greedy match", "start (share)", "marks"):
        table.add_column(column, justify="left" if column in ("config", "status") else "right")
    return table


def short_load(label: str) -> str:
    """'concurrency 4' -> 'c4', 'Poisson 2.5 req/s' -> '2.5/s'."""
    mode, _, rest = label.partition(" ")
    return {"concurrency": f"c{rest}", "Poisson": f"{rest.split()[0]}/s" if rest else label}.get(mode, label)


def predicted_cell(r: TrialRow, measured: float | None) -> str:
    """The guided search's prediction and, once measured, its error. Over several loads the
    prediction is of the study's objective, the geometric mean over the loads: ``measured``."""
    if r.predicted_tokens_per_s is None:
        return "-"
    cell = f"{r.predicted_tokens_per_s:.0f}±{r.predicted_sigma:.0f}"
    if measured:
        cell += f" ({r.predicted_tokens_per_s / measured - 1:+.0%})"
    return cell


def _add_row(table: Table, r: TrialRow, baseline_tokens_per_s: float | None,
             objective: float | None = None, predicted: str | None = None) -> None:
    """``predicted``: the cell's text where it is not the prediction itself."""
    base = baseline_tokens_per_s
    ratio = f"{r.tokens_per_s / base:.2f}x" if base and r.tokens_per_s else "-"
    tokens = "-"
    if r.tokens_per_s:
        tokens = f"{r.tokens_per_s:.1f}" + (f" ±{r.tokens_per_s_mad:.1f}" if r.repeats > 1 else "")
    match = "-" if r.greedy_match_rate is None else (
        f"{r.greedy_match_rate:.0%}" if r.greedy_match_rate == 1
        # Differing only at the baseline's own near-ties: not a change, shown apart.
        else f"[yellow]{r.greedy_match_rate:.0%}[/] (near-ties {r.greedy_near_tie_rate:.0%})"
        if not r.greedy_change_rate
        else f"[red]{r.greedy_match_rate:.0%}[/]" + divergence_text(r.first_divergence, r.greedy_near_tie_rate))
    number = "k/bs" if r.kind == "k_by_batch_size" else str(r.optuna_trial_number)
    tpot = "-" if not r.tpot_p50_s else f"{r.tpot_p50_s * 1000:.2f}/" + (
        f"{r.tpot_p99_s * 1000:.2f}" if r.tpot_p99_s is not None else "-")
    table.add_row(
        number, r.label, short_load(r.load), r.status if r.status == "complete" else f"[red]{r.status}[/]",
        tokens, predicted if predicted is not None else predicted_cell(
            r, objective if objective is not None else r.tokens_per_s), ratio, tpot,
        f"{r.mean_acceptance_length:.2f}" if r.mean_acceptance_length else "-",
        " ".join(f"{p:.2f}" for p in r.per_position) if r.per_position else "-",
        match, start_cell(r), f"[yellow]{', '.join(r.marks)}[/]" if r.marks else "-",
    )


def start_cell(r: TrialRow) -> str:
    """The server's start and its share of the whole trial: '56 s (81%)'."""
    if not r.startup_s:
        return "-"
    return f"{r.startup_s:.0f} s" + (f" ({r.start_share:.0%})" if r.start_share else "")


def trials_table(rows: list[TrialRow]) -> Table:
    table = _finished_table((rows[0].study_name if rows else "trials")
                            + " (each trial's figures from its median run)")
    baselines = {r.load: r.tokens_per_s for r in rows if r.config is None and r.status == "complete"}
    objective = objective_by_trial(rows)
    several_loads = len({r.load for r in rows}) > 1
    shown: set[tuple[str, int | None]] = set()
    for r in rows:
        # Over several loads the prediction is of the geometric mean over them: shown once per
        # trial, so that it is not read as a prediction for each load's row.
        key = (r.kind, r.optuna_trial_number)
        repeat = several_loads and key in shown
        shown.add(key)
        _add_row(table, r, baselines.get(r.load), objective.get(r.optuna_trial_number),
                 predicted=("" if repeat else None))
    if several_loads and any(r.predicted_tokens_per_s for r in rows):
        table.caption = "predicted: of the geometric mean over the loads (the study's objective), on a trial's first row"
    return table


def pareto_table(rows: list[TrialRow], slos=()) -> Table:
    """The front of tokens/s versus p99 TPOT, per load, with each point's targets met or not."""
    from tuner.decide.slo import feasible, pareto_front

    table = Table(title="Pareto front: output tokens/s versus TPOT p99", title_justify="left")
    for column in ("load", "config", "tok/s", "TPOT p99 ms", "meets targets"):
        table.add_column(column, justify="left" if column == "config" else "right")
    for load in dict.fromkeys(r.load for r in rows):
        for r in pareto_front([r for r in rows if r.load == load and r.kind == "study"]):
            table.add_row(short_load(load), r.label, f"{r.tokens_per_s:.1f}", f"{r.tpot_p99_s * 1000:.2f}",
                          ("yes" if feasible(r, slos) else "[red]no[/]") if slos else "-")
    return table


def context_table(rows: list[TrialRow]) -> Table | None:
    """Acceptance length by context length (prompt + tokens generated before the step), per
    speculative config and load, from the requests' own steps; None where no trial has them."""
    # The baseline's row too: its decode rate per bucket is what the configs' compare with.
    shown = [r for r in rows if r.acceptance_by_context and (r.config is not None or any(
        b.get("tokens_per_s") for b in r.acceptance_by_context))]
    if not any(r.config is not None for r in shown):
        return None
    spans = sorted({(b["from"], b["to"]) for r in shown for b in r.acceptance_by_context})
    table = Table(title="tokens per decode step (steps), decode tok/s per request, by context length: "
                        "tokens of prompt + output so far", title_justify="left")
    table.add_column("config")
    table.add_column("load")
    for lo, hi in spans:
        table.add_column(f"{lo}-{hi - 1}", justify="right")
    for r in shown:
        cells = {(b["from"], b["to"]): f"{b['tokens_per_step']:.2f} ({b['steps']})"
                 + (f" {b['tokens_per_s']:.0f}/s" if b.get("tokens_per_s") else "") for b in r.acceptance_by_context}
        table.add_row(r.label, short_load(r.load), *(cells.get(span, "-") for span in spans))
    return table


def prediction_error(rows: list[TrialRow]) -> str | None:
    """How far the step-cost model was off on the trials it predicted."""
    found = prediction_figures(rows)
    if found is None:
        return None
    n, mean, worst = found
    trials = "1 trial" if n == 1 else f"{n} trials"
    return f"step-cost model: predicted {trials}, mean absolute error {mean:.1%}, worst {worst:.1%}"


def k_by_batch_size_text(outcome) -> str:
    """The k-by-batch-size schedule, measured, against the best single config and the baseline."""
    k_by_batch_size = outcome.k_by_batch_size
    lines = ["[bold]k by batch size[/] (vLLM num_speculative_tokens_per_batch_size)"]
    if k_by_batch_size.config() is None:
        lines.append("speculation loses at every load level")
        return "\n".join(lines)
    measured = {r.load: r for r in outcome.k_by_batch_size_rows or []}
    single = {r.load: r for r in outcome.single or []}
    for level in k_by_batch_size.levels:
        parts = [f"  {level.load}: k={level.k}",
                 f"baseline {level.baseline.tokens_per_s:.1f}"]
        if level.load in single:
            parts.append(f"best single ({single[level.load].label}) {single[level.load].tokens_per_s:.1f}")
        own = measured.get(level.load)
        if own is not None and own.tokens_per_s and level.baseline.tokens_per_s:
            parts.append(f"k by batch size {own.tokens_per_s:.1f} tok/s ({own.tokens_per_s / level.baseline.tokens_per_s:.2f}x)")
        if own is not None and own.k_applied is not None:
            parts.append(f"server drafted {own.k_applied:.2f} tokens per draft")  # did it use k here?
        lines.append(", ".join(parts))
    if not k_by_batch_size.needs_own_server:
        lines.append(f"the same k at every load: that is the single config of k={k_by_batch_size.max_k}, "
                     "measured above, so it was not started again")
    elif outcome.k_by_batch_size_rows is None and outcome.time_limit_reached:
        lines.append("[yellow]not measured on its own server: --time-limit left no time for it[/]")
    elif outcome.k_by_batch_size_rows is None:
        lines.append("[red]the k-by-batch-size schedule's own measurement failed[/]; see the trials table")
    elif k_by_batch_size_beats_single(outcome.k_by_batch_size_rows, outcome.single, _noise(outcome.verdict)) is False:
        lines.append(f"[yellow]the k-by-batch-size schedule was not faster than the best single config "
                     f"({outcome.single[0].label}) over these levels beyond the noise[/]")
    return "\n".join(lines)


def _noise(verdict: Verdict | None) -> float:
    """The noise margin the study's verdict was decided under."""
    return next(iter(verdict.answers.values())).noise if verdict is not None and verdict.answers else DEFAULT_NOISE


def answer_text(answer: Answer, with_verdict: bool = True) -> str:
    """The figures behind the answer at one load; what to deploy is the verdict's."""
    lines = [f"[bold]{answer.model} | {answer.workload_type} | {answer.load}[/]"]
    if with_verdict:  # one of several loads: what wins there
        lines.append(f"at this load: {answer.verdict}")
    lines.append(f"baseline: {answer.baseline.tokens_per_s:.1f} tok/s")
    if answer.slos:
        lines.append("latency targets: " + ", ".join(slo.text for slo in answer.slos)
                     + ("" if answer.meets_slos else " [red](none met)[/]"))
    if answer.best is not None:
        best = answer.best
        lines.append(f"best speculative: {best.label}: {best.tokens_per_s:.1f} tok/s"
                     + (f", acceptance rate {best.acceptance_rate:.3f}, acceptance length "
                        f"{best.mean_acceptance_length:.2f}" if best.acceptance_rate is not None else ""))
        if answer.tpot_change is not None:
            lines.append(f"TPOT p50 change: {answer.tpot_change:+.1%}")
        elif not (latency_trusted(best.marks) and latency_trusted(answer.baseline.marks)):
            lines.append("TPOT p50 change: not shown, a latency figure is marked untrusted")
    w = answer.winner
    if w is not None and w.repeats > 1 and w.tokens_per_s_ci:
        known = f", mean known to +-{w.tokens_per_s_precision:.1%}" if w.tokens_per_s_precision else ""
        servers = f" on {w.starts} servers" if w.starts > 1 else ""
        lines.append(f"winner over {w.repeats} runs{servers}: median {w.tokens_per_s:.1f} tok/s, MAD "
                     f"{w.tokens_per_s_mad:.1f}, 95% CI {w.tokens_per_s_ci[0]:.1f}-{w.tokens_per_s_ci[1]:.1f}{known}")
    shown = w or answer.baseline
    lines.append(f"measured {shown.finished_at:%Y-%m-%d %H:%M} on {shown.host}, "
                 f"vLLM {shown.vllm_version or '?'}")
    return "\n".join(lines)


def verdict_text(verdict: Verdict, rows: list[TrialRow] | None = None, config_file: str | None = None) -> str:
    """The study's one answer: every load's figures, then what to deploy and the line to paste."""
    lines = [answer_text(a, with_verdict=len(verdict.answers) > 1) for a in verdict.answers.values()]
    colour = ("yellow" if verdict.kind == "off" or verdict.what_if
              else "green" if verdict.kind in ("config", "k_by_batch_size") else "red")
    lines.append(f"[bold {colour}]answer: {verdict.headline}[/]")
    for note in verdict.notes:
        lines.append(f"[yellow]note[/]: {note}")
    if rows and (error := prediction_error(rows)):
        lines.append(error)
    if verdict.what_if:
        lines.append("nothing to deploy from a what-if study: measure again without --synthetic-acceptance")
        return "\n".join(lines)
    if not verdict.deployable:
        lines.append("nothing to deploy: relax the targets or widen the search space")
        return "\n".join(lines)
    lines.append("deploy with:")
    lines.append(f"  {verdict.serve_command()}")
    if config_file and verdict.deployed is not None:
        lines.append(f"speculative config written to {config_file}: "
                     f"--speculative-config \"$(cat {config_file})\"")
    return "\n".join(lines)


def answer_dict(answer: Answer) -> dict:
    def row(r: TrialRow | None) -> dict | None:
        if r is None:
            return None
        return {"label": r.label, "config": r.config, "tokens_per_s": r.tokens_per_s,
                "tpot_p50_s": r.tpot_p50_s, "ttft_p50_s": r.ttft_p50_s,
                "acceptance_rate": r.acceptance_rate, "mean_acceptance_length": r.mean_acceptance_length,
                "per_position": r.per_position, "trial": r.optuna_trial_number,
                "repeats": r.repeats, "starts": r.starts, "tokens_per_s_mad": r.tokens_per_s_mad,
                "tokens_per_s_ci": r.tokens_per_s_ci, "tokens_per_s_precision": r.tokens_per_s_precision,
                "greedy_match_rate": r.greedy_match_rate,
                "greedy_near_tie_rate": r.greedy_near_tie_rate, "greedy_change_rate": r.greedy_change_rate,
                "first_divergence": r.first_divergence, "marks": list(r.marks),
                "request_acceptance": r.request_acceptance, "acceptance_by_context": r.acceptance_by_context,
                "server_tpot_mean_s": r.server_tpot_mean_s,
                "finished_at": r.finished_at.isoformat() if r.finished_at else None,
                "vllm_version": r.vllm_version, "host": r.host}

    return {"model": answer.model, "workload_type": answer.workload_type, "load": answer.load,
            "study": answer.study_name, "meets_slos": answer.meets_slos,
            "slos": [slo.text for slo in answer.slos], "keep_speculation_off": answer.keep_speculation_off,
            "speedup": answer.speedup, "tpot_change": answer.tpot_change, "noise": answer.noise,
            "verdict": answer.verdict, "winner": row(answer.winner), "best_speculative": row(answer.best),
            "closest": row(answer.closest), "baseline": row(answer.baseline),
            "output_changed": [row(r) for r in answer.output_changed],
            "undecided": [row(r) for r in answer.undecided]}


def verdict_dict(verdict: Verdict) -> dict:
    """The first load's answer at the top level (as for one load), every load's under 'answers',
    and the verdict: what to deploy and the line, the same in `tuner best`, the dashboard and
    `tuner optimize --json`."""
    first = next(iter(verdict.answers.values()))
    return {**answer_dict(first), "load": verdict.load,
            "answers": {load: answer_dict(a) for load, a in verdict.answers.items()},
            "kind": verdict.kind, "deployable": verdict.deployable,
            "keep_speculation_off": verdict.keep_speculation_off, "verdict": verdict.headline,
            "what_if": verdict.what_if,
            "deployed_label": verdict.label if verdict.deployable else None,
            "what_if_label": verdict.label if verdict.what_if and verdict.kind != "none" else None,
            "closest_label": verdict.label if verdict.kind == "none" else None,
            "speedup": verdict.speedup,
            "speculative_config": verdict.deployed if verdict.deployable else None,
            "serve_command": verdict.serve_command(), "server_args": list(verdict.args),
            "notes": list(verdict.notes)}


def optimize_report(outcome, rows: list[TrialRow], grid: int, several_workers: bool,
                    config_file: str | None) -> list:
    """What `tuner optimize` prints at its end, in table form: the trials, the server starts, the
    Pareto front, the k by batch size and the verdict with its deploy line. A what-if study
    (--synthetic-acceptance) says so in the verdict's own notes."""
    shown: list = [trials_table(rows)]
    if several_workers:
        shown.append(f"trials of this study, every worker's: {len(rows)}")
    shown.append(f"server starts in this run: {outcome.restarts} (the grid of this space: {grid})")
    if outcome.time_limit_reached:
        shown.append(f"[yellow]stopped by --time-limit after {outcome.elapsed_s:.0f} s[/]: no trial fitted "
                     "in the time left, so the answer below is the best of what was measured; the same "
                     "command goes on with the study")
    slos = next(iter(outcome.verdict.answers.values())).slos if outcome.verdict.answers else ()
    shown.append(pareto_table(rows, slos))
    if (by_context := context_table(rows)) is not None:
        shown.append(by_context)
    if outcome.k_by_batch_size is not None:
        shown.append(k_by_batch_size_text(outcome))
    shown.append(verdict_text(outcome.verdict, rows, config_file))
    return shown


def outcome_dict(outcome) -> dict:
    """The verdict, and the k by batch size where several concurrency levels were measured."""
    k_by_batch_size = None
    if outcome.k_by_batch_size is not None:
        rows = outcome.k_by_batch_size_rows
        k_by_batch_size = {**outcome.k_by_batch_size.to_dict(),
                           "measured_tokens_per_s": {r.load: r.tokens_per_s for r in rows or []},
                           "best_single": [{"load": r.load, "label": r.label, "config": r.config,
                                            "tokens_per_s": r.tokens_per_s} for r in outcome.single or []],
                           "beats_best_single": k_by_batch_size_beats_single(rows, outcome.single,
                                                                             _noise(outcome.verdict))}
    return {**verdict_dict(outcome.verdict), "k_by_batch_size": k_by_batch_size,
            "schedule": k_by_batch_size,  # deprecated alias of "k_by_batch_size", removed next release
            "server_starts": outcome.restarts, "time_limit_reached": outcome.time_limit_reached,
            "elapsed_s": round(outcome.elapsed_s, 1)}


def schedules_table(views: list[dict]) -> Table:
    table = Table(title="schedules", title_justify="left")
    for column in ("name", "cron", "next run", "model", "workload type", "GPUs", "last job"):
        table.add_column(column)
    for v in views:
        job = v["last_job"]
        last = f"#{job['id']} {job['status']}" + (f", {job['outcome']}" if job and job["outcome"] else "") if job else "–"
        table.add_row(v["name"], f"{v['cron']} ({v['timezone']})", v["next_run"], v["model"],
                      v["workload_type"], v["gpus"] or "all", last)
    return table


def jobs_table(jobs) -> Table:
    table = Table(title="latest jobs", title_justify="left")
    for column in ("#", "schedule", "reason", "status", "started", "finished", "outcome"):
        table.add_column(column, justify="right" if column == "#" else "left")
    for j in jobs:
        when = [t.isoformat(timespec="seconds") if t else "–" for t in (j.started_at, j.finished_at)]
        outcome = f"{j.outcome}: {j.outcome_detail}" if j.outcome else (j.outcome_detail or "–")
        table.add_row(str(j.id), j.schedule_name, j.reason, j.status, *when, outcome)
    return table
