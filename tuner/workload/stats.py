"""What a workload file holds: request mix, prompt and output lengths, and arrival pattern.

Prompt lengths are in tokens when a tokenizer is given (what the server sees), else in
characters (no model needed): the ``prompt``, or the contents of all messages together. The
mean arrival rate is (requests - 1) / span, one over the mean gap. Both are the definitions
of workloads/README.md. Percentiles use numpy's default linear interpolation.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from tuner.workload.classify import DEFAULT_MIN_CONFIDENCE, TypeCounts, type_counts
from tuner.workload.model import Request, Workload
from tuner.workload.tokens import load_tokenizer

RATE_BUCKETS = 10  # enough to see a ramp or a burst, few enough to read in one row
CHARS_PER_TOKEN = 4  # the context-length estimate without a tokenizer
LEFT_OUT_SHARE = 0.10  # a length bucket holding more of the traffic than this must be replayed


@dataclass(frozen=True)
class Distribution:
    count: int
    min: float
    p50: float
    p90: float
    p99: float
    max: float
    mean: float


@dataclass(frozen=True)
class ArrivalStats:
    span_s: float  # last arrival minus first
    rate_per_s: float | None  # (requests - 1) / span; None when every request arrives at once
    bucket_s: float  # width of each rate bucket
    bucket_rates: tuple[float, ...]  # arrivals / width of RATE_BUCKETS equal slices of the span
    gap_cv: float | None  # std / mean of the gaps: 1 for Poisson, > 1 bursty, < 1 paced


@dataclass(frozen=True)
class WorkloadStats:
    path: str
    type: str
    requests: int
    chat: int  # requests with messages; the rest use prompt
    types: dict[str, int]  # per-line `type` field, for the lines that have one
    classified: TypeCounts  # what `tuner workload split` would do with the file
    prompt_unit: str  # "tokens" or "chars"
    prompt: Distribution
    output: Distribution | None  # from output_tokens; None when no line gives it
    output_tokens_given: int
    only_max_tokens: int  # lines with max_tokens but no output_tokens
    no_output_length: int  # lines with neither
    arrivals: ArrivalStats | None  # None unless every line has arrival_s
    missing_arrivals: int  # lines without arrival_s
    # Requests per power-of-two bucket of context length (prompt + output, in tokens; estimated
    # as characters / 4 without a tokenizer): [{"from", "to", "requests", "share"}, ...].
    context_mix: tuple[dict, ...] = ()

    @property
    def completion(self) -> int:
        return self.requests - self.chat

    @property
    def chat_share(self) -> float:
        return self.chat / self.requests


def distribution(values: Sequence[float]) -> Distribution:
    array = np.asarray(values, dtype=float)
    p50, p90, p99 = np.percentile(array, [50, 90, 99])
    return Distribution(count=len(array), min=float(array.min()), p50=float(p50), p90=float(p90),
                        p99=float(p99), max=float(array.max()), mean=float(array.mean()))


def prompt_text(request: Request) -> str:
    """The prompt, or a chat's message contents joined by newlines (what a tokenizer without
    a chat template reads; an assistant turn that only called tools has no content)."""
    if request.messages is None:
        return request.prompt or ""
    return "\n".join(m.get("content") or "" for m in request.messages)


def char_lengths(requests: Sequence[Request]) -> list[int]:
    """Characters of the prompt, or of all message contents together."""
    return [len(r.prompt or "") if r.messages is None
            else sum(len(m.get("content") or "") for m in r.messages) for r in requests]


def token_counter(tokenizer: str) -> Callable[[Request], int]:
    """Counts prompt tokens as the server would: chats through the chat template with the
    generation prompt (vLLM's default) when the tokenizer has one."""
    tok = load_tokenizer(tokenizer)

    def count(request: Request) -> int:
        if request.messages is not None and getattr(tok, "chat_template", None):
            ids = tok.apply_chat_template(list(request.messages), tokenize=True,
                                          add_generation_prompt=True, return_dict=False)
            return len(ids)
        return len(tok(prompt_text(request))["input_ids"])

    return count


def length_bucket(tokens: int) -> tuple[int, int]:
    """The power-of-two bucket [lo, hi) of a context length: [0, 256), [256, 512), [512, 1024) ...
    The same buckets as the acceptance by context length (tuner/replay/acceptance.py)."""
    lo = 0 if tokens < 256 else 1 << (tokens.bit_length() - 1)
    return lo, max(256, lo * 2)


def context_lengths(requests: Sequence[Request], prompt_tokens: Sequence[int] | None = None) -> list[int]:
    """Prompt plus output tokens per request (output: output_tokens, else max_tokens, else 0);
    ``prompt_tokens`` where a tokenizer counted them, else characters / 4."""
    prompts = prompt_tokens if prompt_tokens is not None else [c // CHARS_PER_TOKEN for c in char_lengths(requests)]
    return [p + (r.output_tokens or r.max_tokens or 0) for p, r in zip(prompts, requests)]


def context_mix(lengths: Sequence[int]) -> tuple[dict, ...]:
    counts = Counter(length_bucket(n) for n in lengths)
    return tuple({"from": lo, "to": hi, "requests": n, "share": n / len(lengths)}
                 for (lo, hi), n in sorted(counts.items()))


REPLAY_FIX = "replay more of it (a larger --requests-per-client, or none)"


def left_out(full: Sequence[Request], part: Sequence[Request], subject: str = "the replayed requests",
             fix: str = REPLAY_FIX) -> str | None:
    """One sentence where ``part`` has no request of a context-length bucket that holds more
    than a tenth of ``full``; None where it covers the mix."""
    have = {length_bucket(n) for n in context_lengths(part)}
    missing = [b for b in context_mix(context_lengths(full))
               if b["share"] > LEFT_OUT_SHARE and (b["from"], b["to"]) not in have]
    if not missing:
        return None
    spans = ", ".join(f"{b['from']}-{b['to'] - 1} tokens ({b['share']:.0%})" for b in missing)
    return (f"warning: {subject} leave out part of the workload's context-length mix: {spans} of its "
            f"{len(full)} requests (prompt + output, estimated as characters / 4); acceptance often "
            f"falls with the context, so {fix}")


def arrival_stats(arrivals: Sequence[float], buckets: int = RATE_BUCKETS) -> ArrivalStats:
    times = np.asarray(arrivals, dtype=float)
    span = float(times[-1] - times[0])
    gaps = np.diff(times)
    gap_cv = float(gaps.std() / gaps.mean()) if len(gaps) > 1 and gaps.mean() > 0 else None
    if span <= 0:
        return ArrivalStats(span_s=0.0, rate_per_s=None, bucket_s=0.0, bucket_rates=(),
                            gap_cv=gap_cv)
    counts, _ = np.histogram(times, bins=buckets, range=(times[0], times[-1]))
    width = span / buckets
    return ArrivalStats(span_s=span, rate_per_s=(len(times) - 1) / span, bucket_s=width,
                        bucket_rates=tuple(float(c / width) for c in counts), gap_cv=gap_cv)


def workload_stats(workload: Workload, tokenizer: str | None = None,
                   min_confidence: float = DEFAULT_MIN_CONFIDENCE) -> WorkloadStats:
    """Figures of ``workload``; ``tokenizer`` is a local path for AutoTokenizer, or None
    to measure prompts in characters; ``min_confidence`` as for `tuner workload split`."""
    requests = workload.requests
    if tokenizer is not None:
        count = token_counter(tokenizer)
        prompt_lengths, unit = [count(r) for r in requests], "tokens"
    else:
        prompt_lengths, unit = char_lengths(requests), "chars"
    contexts = context_lengths(requests, prompt_lengths if tokenizer is not None else None)
    outputs = [r.output_tokens for r in requests if r.output_tokens is not None]
    arrivals = [r.arrival_s for r in requests if r.arrival_s is not None]
    return WorkloadStats(
        path=str(workload.path),
        type=workload.type,
        requests=len(requests),
        chat=sum(r.is_chat for r in requests),
        types=dict(Counter(r.type for r in requests if r.type is not None)),
        classified=type_counts(requests, min_confidence),
        prompt_unit=unit,
        prompt=distribution(prompt_lengths),
        output=distribution(outputs) if outputs else None,
        output_tokens_given=len(outputs),
        only_max_tokens=sum(r.output_tokens is None and r.max_tokens is not None for r in requests),
        no_output_length=sum(r.output_tokens is None and r.max_tokens is None for r in requests),
        arrivals=arrival_stats(arrivals) if len(arrivals) == len(requests) else None,
        missing_arrivals=len(requests) - len(arrivals),
        context_mix=context_mix(contexts),
    )


def stats_dict(stats: WorkloadStats) -> dict[str, Any]:
    """Plain JSON-ready figures (for ``--json``); the dataclass fields plus the derived shares."""
    result = asdict(stats)
    result["completion"] = stats.completion
    result["chat_share"] = stats.chat_share
    return result
