"""The server's own latencies over one measured window: means from its histograms' sum and count,
and the bucket that holds the median request."""

from __future__ import annotations

from dataclasses import dataclass, field

from tuner.metrics.scrape import SpecCounters


@dataclass(frozen=True)
class ServerLatency:
    """Means over the requests that finished in the window, in seconds; None where not reported."""

    ttft_mean_s: float | None
    tpot_mean_s: float | None
    e2e_mean_s: float | None
    requests: int
    # key ("ttft", "tpot", "e2e") -> (lower, upper) bounds of the histogram bucket holding the
    # window's median request: the server's median lies there, as exactly as its buckets tell.
    median_bounds: dict[str, tuple[float, float]] = field(default_factory=dict)


def median_bucket(before: dict[float, float], after: dict[float, float]) -> tuple[float, float] | None:
    """The (lower, upper) bounds of the bucket holding the median of the observations made
    between two readings of a cumulative histogram; None without observations."""
    bounds = sorted(after)
    counts = [after[le] - before.get(le, 0.0) for le in bounds]
    if not counts or counts[-1] <= 0:
        return None
    lower = 0.0
    for le, count in zip(bounds, counts):
        if count >= counts[-1] / 2:
            return lower, le
        lower = le
    return None


def latency_between(before: SpecCounters, after: SpecCounters) -> ServerLatency | None:
    """None when the server exposes none of the histograms (an older vLLM, or a stand-in)."""
    if not after.latency:
        return None
    means: dict[str, float | None] = {}
    finished = 0.0
    for key in ("ttft", "tpot", "e2e"):
        total, count = after.latency.get(key, (0.0, 0.0))
        total0, count0 = before.latency.get(key, (0.0, 0.0))
        n = count - count0
        means[key] = (total - total0) / n if n > 0 else None
        finished = max(finished, n)
    medians = {key: bounds for key in after.buckets
               if (bounds := median_bucket(before.buckets.get(key, {}), after.buckets[key]))}
    return ServerLatency(means["ttft"], means["tpot"], means["e2e"], int(finished), medians)
