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
    top_k: int | None = None  # vLLM's extension (0 or -1: off)
    seed: int | None = None
    # Sent as captured, so a replay asks the server for the same work: ``n`` choices of
    # ``output_tokens`` each, stop strings, penalties, logprobs (an int for completions, a bool
    # with ``top_logprobs`` for chat), structured output and, for chat, tools (opaque JSON).
    n: int | None = None
    stop: str | tuple[str, ...] | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    logprobs: int | bool | None = None
    top_logprobs: int | None = None
    response_format: dict[str, Any] | None = None
    tools: list[Any] | None = None
    tool_choice: str | dict[str, Any] | None = None
    # vLLM's and OpenAI's further sampling parameters, sent as captured.
    repetition_penalty: float | None = None
    min_p: float | None = None
    logit_bias: dict[str, float] | None = None
    stop_token_ids: tuple[int, ...] | None = None
    arrival_s: float | None = None
    id: str | None = None
    output_tokens: int | None = None  # per choice
    type: str | None = None  # a per-line workload type; overrides the classifier of `workload split`

    @property
    def is_chat(self) -> bool:
        return self.messages is not None

    @property
    def choices(self) -> int:
        return self.n or 1

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
