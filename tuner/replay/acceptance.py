"""Acceptance per request, and by context length, from what each request's stream said.

Two sources:

- The stream itself: with one chunk per engine step, a request's first chunk is the prefill's
  token and every later chunk is 1 + the drafts its step accepted. Its tokens per step is what
  the throughput follows, and each step's context length (prompt + tokens before it) is known, so
  the steps are bucketed by context length. A server that coalesces steps into one chunk (a slow
  reader) makes fewer, larger steps; held against the counts below, that shows.
- vLLM's own per-request counts (``--per-request-spec-decode-metrics``, vLLM >= 0.29, on the final
  usage chunk): the steps that drafted, the drafts proposed and accepted. They and vLLM's counters
  count the same steps, so their total over a replay must equal the ``/metrics`` deltas.

tuner.decide.marks holds the totals against ``/metrics``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tuner.replay.client import RequestResult
from tuner.workload.stats import length_bucket

SERVER, STREAM = "server", "stream"


@dataclass(frozen=True)
class RequestSteps:
    """One request's decode steps as its stream showed them, and vLLM's counts where it sent them."""

    request_id: str
    tokens: tuple[int, ...]  # per decode step after the prefill's token: 1 + accepted drafts
    contexts: tuple[int, ...]  # per step: prompt + tokens generated before it
    # vLLM's own: steps that drafted, drafts accepted, drafts proposed; None where it sent none.
    server: tuple[int, int, int] | None = None
    # per step: seconds since the chunk before it, as the client saw them; () where not known
    seconds: tuple[float, ...] = ()

    @property
    def stream_accepted(self) -> int:
        return sum(self.tokens) - len(self.tokens)

    @property
    def acceptance_length(self) -> float | None:
        """1 + accepted drafts per drafting step (vLLM's definition) where vLLM counted them, else
        tokens per decode step from the stream (the same for a drafter that drafts every step)."""
        if self.server is not None:
            steps, accepted, _ = self.server
            return 1.0 + accepted / steps if steps else None
        return sum(self.tokens) / len(self.tokens) if self.tokens else None

    def to_list(self) -> list:
        """As stored per request: [decode steps, tokens, vLLM's steps, accepted, proposed (or
        None each), acceptance length]."""
        steps, accepted, drafted = self.server or (None, None, None)
        return [len(self.tokens), sum(self.tokens), steps, accepted, drafted, self.acceptance_length]


def request_steps(result: RequestResult) -> RequestSteps | None:
    """The steps of one completed request; None where its stream has no token ids (a failed
    request, n > 1, a server without ``return_token_ids``) and vLLM sent no counts."""
    if not result.ok:
        return None
    spec = result.spec_decoding or {}
    server = None
    if "num_spec_steps" in spec:
        server = (int(spec["num_spec_steps"]), int(spec.get("num_accepted_draft_tokens") or 0),
                  int(spec.get("num_draft_tokens") or 0))
    chunks = result.chunk_tokens or ()
    if not chunks and server is None:
        return None
    tokens = tuple(chunks[1:])
    contexts, at = [], (result.prompt_tokens or 0) + (chunks[0] if chunks else 0)
    for n in tokens:
        contexts.append(at)
        at += n
    arrived = result.chunk_at or ()
    seconds = tuple(b - a for a, b in zip(arrived, arrived[1:])) if len(arrived) == len(chunks) else ()
    return RequestSteps(result.request_id, tokens, tuple(contexts), server, seconds)


@dataclass(frozen=True)
class RequestsAcceptance:
    """A replay's requests' steps added up, to hold against /metrics over the same window."""

    requests: int
    stream_steps: int
    stream_accepted: int  # accepted drafts as the streams show them (1 - tokens per chunk, summed)
    # vLLM's per-request counts, summed; None unless every request had them.
    server_steps: int | None = None
    server_accepted: int | None = None
    server_drafted: int | None = None

    @property
    def source(self) -> str:
        return SERVER if self.server_steps is not None else STREAM

    @property
    def accepted_tokens(self) -> int:
        return self.server_accepted if self.server_accepted is not None else self.stream_accepted

    @property
    def acceptance_length(self) -> float | None:
        if self.server_steps is not None:
            return 1.0 + (self.server_accepted or 0) / self.server_steps if self.server_steps else None
        return 1.0 + self.stream_accepted / self.stream_steps if self.stream_steps else None

    def to_dict(self) -> dict:
        return {"source": self.source, "requests": self.requests, "stream_steps": self.stream_steps,
                "stream_accepted": self.stream_accepted, "server_steps": self.server_steps,
                "server_accepted": self.server_accepted, "server_drafted": self.server_drafted,
                "acceptance_length": self.acceptance_length}


def requests_acceptance(steps: Sequence[RequestSteps]) -> RequestsAcceptance | None:
    if not steps:
        return None
    counted = [s.server for s in steps if s.server is not None]
    every = len(counted) == len(steps)
    return RequestsAcceptance(
        requests=len(steps), stream_steps=sum(len(s.tokens) for s in steps),
        stream_accepted=sum(s.stream_accepted for s in steps),
        server_steps=sum(c[0] for c in counted) if every else None,
        server_accepted=sum(c[1] for c in counted) if every else None,
        server_drafted=sum(c[2] for c in counted) if every else None)


def by_context(steps: Sequence[RequestSteps]) -> list[dict]:
    """Per power-of-two context bucket, in order: ``from``, ``to`` (tokens), ``steps``,
    ``tokens_per_step`` (1 + accepted drafts, over every decode step) and, where every step's time
    is known, ``tokens_per_s``: a request's decode rate at those lengths (its tokens over the
    time between its chunks), the figure the baseline's own buckets compare with."""
    totals: dict[tuple[int, int], list] = {}  # bucket -> [steps, tokens, seconds, every step timed]
    for request in steps:
        per_step = request.seconds or (None,) * len(request.tokens)
        for tokens, context, seconds in zip(request.tokens, request.contexts, per_step):
            bucket = totals.setdefault(length_bucket(context), [0, 0, 0.0, True])
            bucket[0] += 1
            bucket[1] += tokens
            if seconds is None:
                bucket[3] = False
            else:
                bucket[2] += seconds
    return [{"from": lo, "to": hi, "steps": n, "tokens_per_step": tokens / n,
             **({"tokens_per_s": tokens / seconds} if all_timed and seconds > 0 else {})}
            for (lo, hi), (n, tokens, seconds, all_timed) in sorted(totals.items())]
