"""The Typer app and how every command turns the tuner's errors into one sentence and an exit code."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

import typer
from rich.markup import escape

from tuner.errors import TunerError
from tuner.outputs import err_console


class OneLineErrors(typer.core.TyperGroup):
    """Typer's own refusals of an option (a value of the wrong kind or out of range, a missing
    option) in the tuner's form: `error:` and one sentence, exit code 2, instead of usage text and
    a panel. The group's own options are parsed in parse_args, the subcommands' inside its invoke."""

    def parse_args(self, ctx, args):
        with _one_line_usage_errors():
            return super().parse_args(ctx, args)

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


app = typer.Typer(
    help="Find the fastest vLLM speculative-decoding configuration for your model and traffic.",
    no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False, cls=OneLineErrors,
)
db_app = typer.Typer(help="The results database.", no_args_is_help=True)
workload_app = typer.Typer(help="Workload files: import, inspect, sample, split.", no_args_is_help=True)
schedule_app = typer.Typer(help="Recurring tuning jobs, run by `tuner serve`.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(workload_app, name="workload")
app.add_typer(schedule_app, name="schedule")


@app.callback()
def _root() -> None:
    """Measure and tune vLLM speculative decoding."""


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
