"""Write workload JSONL: the one place that turns a Request back into a line the loader reads."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from tuner.workload.model import Request

# Field order in the file: what a person reads first.
_ORDER = ("id", "type", "messages", "prompt", "max_tokens", "temperature", "top_p", "seed",
          "arrival_s", "output_tokens")


def request_line(request: Request) -> dict[str, Any]:
    """The JSON object of one request; fields that are None are left out."""
    values = {
        "id": request.id, "type": request.type,
        "messages": list(request.messages) if request.messages is not None else None,
        "prompt": request.prompt, "max_tokens": request.max_tokens,
        "temperature": request.temperature, "top_p": request.top_p, "seed": request.seed,
        "arrival_s": request.arrival_s, "output_tokens": request.output_tokens,
    }
    return {name: values[name] for name in _ORDER if values[name] is not None}


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
