"""Find the line in a vLLM server log that says why it failed."""

from __future__ import annotations

import re
from pathlib import Path

TAIL_LINES = 400
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# "(EngineCore pid=12) ERROR 11-30 06:10:03 [core.py:123] " and the like, in front of the message.
_PREFIX = re.compile(r"^(\(\w+(?: pid=\d+)?\)\s+)?([A-Z]+ \d\d-\d\d [\d:.]+ \[[^\]]+\]\s*)?")
_ERROR = re.compile(r"^(?:[\w.]+\.)?(\w*(?:Error|Exception)): (.+)$")
# Wrappers that only point at the real cause printed above them.
_WRAPPERS = ("Engine core initialization failed", "See root cause above", "EngineDeadError")


def _clean(line: str) -> str:
    return _PREFIX.sub("", _ANSI.sub("", line).rstrip()).strip()


def read_tail(path: Path, lines: int = TAIL_LINES) -> list[str]:
    try:
        with path.open("r", encoding="utf-8", errors="replace") as log:
            return log.readlines()[-lines:]
    except OSError:
        return []


def failure_cause(log_lines: list[str]) -> str | None:
    """The root error of a failed start: the first ``SomeError: message`` that is not a wrapper.

    vLLM prints the engine's own error (e.g. a bad draft path) above the API server's
    "Engine core initialization failed. See root cause above." line, so the first match wins.
    Pydantic validation errors put the useful text on the lines after the error line.
    """
    cleaned = [_clean(line) for line in log_lines]
    for index, line in enumerate(cleaned):
        match = _ERROR.match(line)
        if not match or any(w in line for w in _WRAPPERS):
            continue
        name, message = match.groups()
        if name == "ValidationError":
            details = [ln for ln in cleaned[index + 1:index + 4] if ln and not ln.startswith("For further")]
            message = " ".join([message, *details])
        return f"{name}: {message}"
    return None
