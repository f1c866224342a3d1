"""The request and workload types every other room reads."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Request:
    """One captured request: a completions ``prompt`` or a chat ``messages`` list."""

    line: int
    prompt: str | None = None
    messages: tuple[dict[str, Any], ...] | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    arrival_s: float | None = None
    id: str | None = None
    output_tokens: int | None = None
    type: str | None = None  # a per-line workload type; overrides the classifier of `workload split`

    @property
    def is_chat(self) -> bool:
        return self.messages is not None

    @property
    def label(self) -> str:
        return self.id if self.id is not None else f"line {self.line}"


@dataclass(frozen=True)
class Workload:
    """A validated workload file; ``type`` is the workload type (code, chat, ...)."""

    path: Path
    type: str
    requests: tuple[Request, ...]

    @property
    def has_arrivals(self) -> bool:
        return all(r.arrival_s is not None for r in self.requests)

    def __len__(self) -> int:
        return len(self.requests)

    def with_default_seeds(self, base: int) -> Workload:
        """Give every sampled request without a seed the seed ``base + line``, so that each
        configuration sees the same random draws (greedy requests need none)."""
        requests = tuple(
            replace(r, seed=base + r.line) if r.seed is None and r.temperature != 0 else r
            for r in self.requests
        )
        return replace(self, requests=requests)
