"""The server's own mean latencies over one measured window, from its histograms' sum and count."""

from __future__ import annotations

from dataclasses import dataclass

from tuner.metrics.scrape import SpecCounters


@dataclass(frozen=True)
class ServerLatency:
    """Means over the requests that finished in the window, in seconds; None where not reported."""

    ttft_mean_s: float | None
    tpot_mean_s: float | None
    e2e_mean_s: float | None
    requests: int


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
    return ServerLatency(means["ttft"], means["tpot"], means["e2e"], int(finished))
