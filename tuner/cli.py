"""The ``tuner`` command: parse options, call one function, print the result."""

from __future__ import annotations

import contextlib
import json
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from tuner.engine import ServerOptions, SpecConfig
from tuner.errors import TunerError, UsageError
from tuner.replay import LoadSpec
from tuner.report import MeasureProgress, measurement_table
from tuner.trial import MeasureSettings, measure_config
from tuner.workload import load_workload

app = typer.Typer(
    help="Find the fastest vLLM speculative-decoding configuration for your model and traffic.",
    no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False,
)
console = Console()
err_console = Console(stderr=True)


@app.callback()
def _root() -> None:
    """Measure and tune vLLM speculative decoding."""


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Turn the tuner's errors into one red sentence and an exit code; Ctrl-C into exit 130."""
    try:
        yield
    except TunerError as exc:
        err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted[/]: the server was stopped; nothing was measured")
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
def measure(
    workload: Annotated[Path, typer.Option(help="JSONL workload to replay.")],
    model: Annotated[str, typer.Option(help="Target model (path or hub name) for vLLM.")],
    workload_type: Annotated[Optional[str], typer.Option(
        "--type", help="Workload type; default: the file name stem.")] = None,
    spec: Annotated[Optional[str], typer.Option(
        help='Speculative config JSON as vLLM takes it, e.g. \'{"method":"ngram","num_speculative_tokens":4}\'.'
    )] = None,
    method: Annotated[Optional[str], typer.Option(help="ngram, draft_model, eagle3, mtp, ...")] = None,
    draft: Annotated[Optional[str], typer.Option(help="Draft checkpoint (path or hub name).")] = None,
    k: Annotated[Optional[int], typer.Option("--k", help="num_speculative_tokens.")] = None,
    load: Annotated[str, typer.Option(help="concurrency (closed loop), rate (Poisson) or trace.")] = "concurrency",
    concurrency: Annotated[int, typer.Option(help="Clients in the closed loop.")] = 1,
    rate: Annotated[Optional[float], typer.Option(help="Requests per second for --load rate.")] = None,
    time_scale: Annotated[float, typer.Option(help="Multiplies captured gaps for --load trace.")] = 1.0,
    seed: Annotated[int, typer.Option(help="Seed of the Poisson arrivals.")] = 0,
    warmup: Annotated[int, typer.Option(help="Requests sent first and not measured.")] = 2,
    max_tokens: Annotated[int, typer.Option(
        help="Output length for requests that give neither max_tokens nor output_tokens.")] = 128,
    request_timeout: Annotated[float, typer.Option(help="Seconds before a request counts as failed.")] = 600.0,
    server_cmd: Annotated[Optional[str], typer.Option(
        help="Server command template with {model}; default 'vllm serve {model}' "
             "(env TUNER_SERVER_CMD).")] = None,
    server_arg: Annotated[Optional[list[str]], typer.Option(
        help="Extra server argument, repeatable: --server-arg=--max-model-len=1024.")] = None,
    start_timeout: Annotated[float, typer.Option(help="Seconds to wait for /health.")] = 900.0,
    log_dir: Annotated[Path, typer.Option(help="Where server logs go.")] = Path(".tuner/logs"),
    as_json: Annotated[bool, typer.Option("--json", help="Print the measurement as JSON.")] = False,
) -> None:
    """Measure one speculative configuration (or the baseline) on a fresh vLLM server."""
    with user_errors():
        config = spec_from_options(spec, method, draft, k)
        loaded = load_workload(workload, workload_type)
        settings = MeasureSettings(
            load=LoadSpec(load, concurrency, rate, time_scale, seed),  # type: ignore[arg-type]
            warmup=warmup, request_timeout_s=request_timeout, default_max_tokens=max_tokens,
            server=ServerOptions(server_cmd=server_cmd, server_args=list(server_arg or []),
                                 start_timeout_s=start_timeout, log_dir=log_dir),
        )
        with MeasureProgress(err_console) as progress:
            result = measure_config(model, config, loaded, settings, progress)
        if as_json:
            print(json.dumps(result.to_dict(), indent=2))
        else:
            console.print(measurement_table(result))


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> None:
    # SIGTERM (a scheduler or `kill`) takes the same path as Ctrl-C, so the server is stopped.
    signal.signal(signal.SIGTERM, _raise_interrupt)
    app()


if __name__ == "__main__":
    sys.exit(main())
