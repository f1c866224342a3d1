"""Write workload JSONL: the one place that turns a Request back into a line the loader reads."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from tuner.workload.model import Request

# Field order in the file: what a person reads first.
_ORDER = ("id", "type", "messages", "prompt", "max_tokens", "temperature", "top_p", "top_k", "seed",
          "n", "stop", "presence_penalty", "frequency_penalty", "logprobs", "top_logprobs",
          "response_format", "tools", "tool_choice", "repetition_penalty", "min_p", "logit_bias",
          "stop_token_ids", "arrival_s", "output_tokens")


def request_line(request: Request) -> dict[str, Any]:
    """The JSON object of one request; fields that are None are left out."""
    line = {}
    for name in _ORDER:
        value = getattr(request, name)
        if value is not None:
            line[name] = list(value) if isinstance(value, tuple) else value  # messages, stop
    return line


def write_line(out: IO[str], request: Request) -> None:
    """Append one request and flush, so a crash loses at most the line being written."""
    out.write(json.dumps(request_line(request), ensure_ascii=False) + "\n")
    out.flush()


def write_workload(path: str | Path, requests: Iterable[Request]) -> int:
    """Write ``requests`` to ``path`` (parent folders are created); returns how many."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("w", encoding="utf-8") as out:
        for request in requests:
            out.write(json.dumps(request_line(request), ensure_ascii=False) + "\n")
            count += 1
    return count
