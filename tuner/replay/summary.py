"""Summary statistics of one replay (numpy percentiles)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tuner.replay.client import RequestResult


@dataclass(frozen=True)
class Percentiles:
    """Mean and percentiles of one latency, in seconds."""

    mean: float
    p50: float
    p90: float
    p99: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Percentiles | None:
        if not values:
            return None
        array = np.asarray(values, dtype=float)
        p50, p90, p99 = np.percentile(array, [50, 90, 99])
        return cls(mean=float(array.mean()), p50=float(p50), p90=float(p90), p99=float(p99))


@dataclass(frozen=True)
class ReplaySummary:
    requests: int
    completed: int
    failed: int
    duration_s: float
    output_tokens: int
    output_tokens_per_s: float
    requests_per_s: float
    ttft: Percentiles | None
    tpot: Percentiles | None
    e2e: Percentiles | None
    errors: tuple[str, ...]  # the most common error messages, with counts


def summarize(results: Sequence[RequestResult], duration_s: float) -> ReplaySummary:
    done = [r for r in results if r.ok]
    failed = [r for r in results if not r.ok]
    output_tokens = sum(r.output_tokens for r in done)
    errors = Counter(r.error or "unknown error" for r in failed)
    return ReplaySummary(
        requests=len(results),
        completed=len(done),
        failed=len(failed),
        duration_s=duration_s,
        output_tokens=output_tokens,
        output_tokens_per_s=output_tokens / duration_s if duration_s > 0 else 0.0,
        requests_per_s=len(done) / duration_s if duration_s > 0 else 0.0,
        ttft=Percentiles.of([r.ttft_s for r in done if r.ttft_s is not None]),
        tpot=Percentiles.of([t for r in done if (t := r.tpot_s) is not None]),
        e2e=Percentiles.of([r.e2e_s for r in done if r.e2e_s is not None]),
        errors=tuple(f"{count} x {message}" for message, count in errors.most_common(5)),
    )
