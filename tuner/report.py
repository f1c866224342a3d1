"""Rich output for the CLI: live progress while measuring and the summary table after."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from tuner.replay import Percentiles, RequestResult
from tuner.trial import Measurement


class MeasureProgress:
    """Implements tuner.trial.Progress with a rich progress bar on stderr."""

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
    table.add_row("output tokens/s", f"{s.output_tokens_per_s:.1f}")
    table.add_row("requests/s", f"{s.requests_per_s:.2f}")
    table.add_row("completed / failed", f"{s.completed} / {s.failed}")
    table.add_row("output tokens (client / server)", f"{s.output_tokens} / {m.server_generation_tokens}")
    for name, stats in (("TTFT", s.ttft), ("TPOT", s.tpot), ("e2e", s.e2e)):
        table.add_row(f"{name} ms mean / p50 / p90 / p99",
                      " / ".join(_ms(stats, f) for f in ("mean", "p50", "p90", "p99")))
    a = m.acceptance
    if a is None:
        table.add_row("acceptance", "n/a (no speculation)" if m.spec is None else "no drafts")
    else:
        table.add_row("acceptance rate", f"{a.acceptance_rate:.3f}")
        table.add_row("mean acceptance length", f"{a.mean_acceptance_length:.3f}")
        table.add_row("per-position acceptance", " ".join(f"{p:.3f}" for p in a.per_position))
        table.add_row("drafts / draft tokens / accepted",
                      f"{a.drafts} / {a.draft_tokens} / {a.accepted_tokens}")
    table.add_row("server start", f"{m.server.startup_s:.1f} s (vLLM {m.server.vllm_version or '?'})")
    table.add_row("server log", m.server.log_path)
    for error in s.errors:
        table.add_row("[red]error[/]", error)
    return table
