"""Find the line in a vLLM server log that says why it failed."""

from __future__ import annotations

import re
from pathlib import Path

TAIL_LINES = 400
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# "(EngineCore pid=12) ERROR 11-30 06:10:03 [core.py:123] " and the like, in front of the message.
_PREFIX = re.compile(r"^(\([\w-]+(?: pid=\d+)?\) ?)?([A-Z]+ \d\d-\d\d [\d:.]+ \[[^\]]+\] ?)?")
_ERROR = re.compile(r"^(?:[\w.]+\.)?(\w*(?:Error|Exception)): (.+)$")
_PYDANTIC_TYPE = re.compile(r"\s*\[type=[^\]]*\]")
# Wrappers that only point at the real cause printed above them.
_WRAPPERS = ("Engine core initialization failed", "See root cause above", "EngineDeadError",
             "WorkerProc initialization failed")


def _strip(line: str) -> str:
    """The message part of a log line, indentation kept."""
    return _PREFIX.sub("", _ANSI.sub("", line.rstrip("\n")), count=1).rstrip()


def read_tail(path: Path, lines: int = TAIL_LINES) -> list[str]:
    try:
        with path.open("r", encoding="utf-8", errors="replace") as log:
            return log.readlines()[-lines:]
    except OSError:
        return []


def _pydantic_detail(header: str, following: list[str]) -> str:
    """'1 validation error for X' + 'field' + '  message [type=...]' -> 'X: field: message'."""
    model = header.rsplit(" for ", 1)[-1]
    location = None
    for line in following:
        if not line.strip() or line.strip().startswith("For further"):
            continue
        if not line.startswith((" ", "\t")):
            location = line.strip()
            continue
        message = _PYDANTIC_TYPE.sub("", line.strip()).removeprefix("Value error, ")
        return f"{model}: {location}: {message}" if location else f"{model}: {message}"
    return header


_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>\S+)')


def _assertion(before: list[str]) -> str | None:
    """A bare ``AssertionError`` names nothing: the failed ``assert`` and where it is, from the
    traceback lines just above it ('assert 0 < n (vllm/v1/worker/gpu/input_batch.py:109, make_dummy)')."""
    for index in range(len(before) - 1, max(len(before) - 6, 0), -1):
        statement = before[index].strip()
        if statement.startswith("assert ") and (frame := _FRAME.match(before[index - 1])):
            path = frame["file"]
            short = path[path.rfind("vllm/"):] if "vllm/" in path else path
            return f"{statement} ({short}:{frame['line']}, {frame['fn']})"
    return None


def failure_cause(log_lines: list[str]) -> str | None:
    """The root error of a failed start: the first ``SomeError: message`` that is not a wrapper.

    vLLM prints the engine's own error (e.g. a bad draft path) above the API server's
    "Engine core initialization failed. See root cause above." line, so the first match wins.
    Pydantic validation errors put the useful text on the lines after the error line.
    """
    lines = [_strip(line) for line in log_lines]
    for index, line in enumerate(lines):
        if line.strip() == "AssertionError" and (where := _assertion(lines[:index])):
            return f"AssertionError: {where}"
        match = _ERROR.match(line.strip())
        if not match or any(w in line for w in _WRAPPERS):
            continue
        name, message = match.groups()
        if name == "ValidationError":
            message = _pydantic_detail(message, lines[index + 1:index + 6])
        return f"{name}: {message}"
    return None


# What vLLM logs when its engine dies while serving: the engine core's own line above the root
# error's traceback, and the API server's once it finds the engine gone (a killed engine process).
_FATAL = "encountered a fatal error"
_ENGINE_DEATH = re.compile(rf"{_FATAL}|EngineDeadError|died unexpectedly")
# A server that dies mid-replay logs a traceback per request it was serving after the engine's
# own: the root error can be thousands of lines from the end.
DEATH_TAIL_LINES = 50_000


def engine_died(log_lines: list[str]) -> bool:
    """Whether the log says vLLM's engine died (the server may still be up, answering errors)."""
    return any(_ENGINE_DEATH.search(line) for line in log_lines)


def death_cause(log_lines: list[str]) -> str | None:
    """Why a server's engine died after it had started: the root error after the engine's last
    "encountered a fatal error" line (the earlier log may hold errors it survived), else the first
    root error of the lines, as at a failed start."""
    marks = [i for i, line in enumerate(log_lines) if _FATAL in line]
    if marks and (cause := failure_cause(log_lines[marks[-1]:])):
        return cause
    return failure_cause(log_lines)


# vLLM logs the first line when it starts fetching a checkpoint from the Hugging Face Hub and
# the second when the fetch is done; huggingface_hub draws a progress bar per file it fetches
# ("config.json: 100%|████| 1.2k/1.2k [00:00<00:00, 5.1MB/s]").
_DOWNLOAD_STARTED = "Using model weights format"
_DOWNLOAD_DONE = "Time spent downloading weights"
_HUB_PROGRESS = re.compile(r"^\S+: +\d{1,3}%\|.*\| *[\d.]+[kMGT]?B?/[\d.]+[kMGT]?B? \[")


def downloading(log_lines: list[str]) -> bool:
    """Whether the server is fetching its model from the hub right now, by its log's end."""
    lines = [_strip(line) for line in log_lines if line.strip()]
    started = max((i for i, line in enumerate(lines) if _DOWNLOAD_STARTED in line), default=-1)
    done = max((i for i, line in enumerate(lines) if _DOWNLOAD_DONE in line), default=-1)
    last = lines[-1].split("\r")[-1].strip() if lines else ""
    return started > done or bool(_HUB_PROGRESS.match(last))


def read_end(path: Path, size: int = 16384) -> list[str]:
    """The lines of a log's last ``size`` bytes: cheap enough to read twice a second."""
    try:
        with path.open("rb") as log:
            log.seek(0, 2)
            log.seek(max(0, log.tell() - size))
            return log.read().decode("utf-8", errors="replace").splitlines()
    except OSError:
        return []
