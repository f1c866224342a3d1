"""One root exception for everything a user can cause or meet.

Every error carries a message written for the user: what went wrong and how to fix it.
The CLI prints that message and exits; it never shows a traceback for a TunerError.
"""

from __future__ import annotations

from pathlib import Path


class TunerError(Exception):
    """Root of the tuner's errors. ``exit_code`` is what the CLI exits with.

    ``transient``: the host's fault or a passing one (a port taken, GPU memory not yet freed, a
    download still running, a slow /metrics), not the measured config's. Such a trial is tried
    again after a wait and, if it still fails, stored as not measured and rerun next time."""

    exit_code = 1
    transient = False


class UsageError(TunerError):
    """Bad input from the user: options, config JSON, workload files."""

    exit_code = 2


class WorkloadError(UsageError):
    """A workload file has one or more bad lines; each problem reads ``FILE:LINE: reason``."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


class ServerStartError(TunerError):
    """The vLLM server exited or never became ready."""

    def __init__(self, message: str, cause: str | None = None, log_path: Path | None = None,
                 transient: bool = False):
        self.cause = cause
        self.log_path = log_path
        self.transient = transient
        super().__init__(message)


class RefusedAtStart(ServerStartError):
    """vLLM would refuse the config at start, and the tuner knew it from the installed vLLM's own
    rules: no server was started (nor counted as a start)."""


class ServerDiedError(TunerError):
    """The vLLM server exited while it was being measured."""


class MetricsError(TunerError):
    """The server's /metrics could not be read or parsed."""

    transient = True
