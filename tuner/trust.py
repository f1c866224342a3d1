"""Which figures of a replay cannot be trusted, and why.

A figure is marked, not dropped: it stays in the table and the database with its mark, and a
marked latency is never turned into a percentage. The marks:

- coalesced stream: the client saw a request's tokens arrive in one burst (TPOT near 0, TTFT
  near e2e), so its TPOT and TTFT say when the client read the socket, not when the server
  produced the tokens. A busy host does this: the client's event loop stalls. The
  server's own per-request histograms (``/metrics``) are the cross-check.
- token count: the client's output tokens (from the usage reports) disagree with the server's
  generation-token counter over the same window: requests the client did not see end, or
  traffic that was not the replay's.
- repeats disagree: the replays of one config spread by more than the noise.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from tuner.metrics import ServerLatency
from tuner.replay import ReplaySummary, RequestResult
from tuner.stats import mad

COALESCED = "coalesced stream"
TOKEN_COUNT = "token count disagrees with the server"
REPEATS_DISAGREE = "repeats disagree"
# Marks of one replay that another replay on the same server can clear (a stall, stray traffic).
REMEASURABLE = (COALESCED, TOKEN_COUNT)
LATENCY_MARKS = (COALESCED,)

MIN_TOKENS = 8  # a burst of fewer tokens is what a fast server sends anyway
BURST_SHARE = 0.02  # decode time under 2 % of a request's e2e counts as one burst
TOKEN_TOLERANCE = 0.01


def _burst(r: RequestResult) -> bool:
    return (r.ok and r.output_tokens >= MIN_TOKENS and r.e2e_s and r.ttft_s is not None
            and (r.e2e_s - r.ttft_s) < BURST_SHARE * r.e2e_s)


def coalesced(summary: ReplaySummary, requests: Sequence[RequestResult],
              server: ServerLatency | None) -> bool:
    """The client's TPOT is under a quarter of the server's own mean TPOT, or (without the
    server's figure) half the multi-token requests arrived in one burst."""
    if server is not None and server.tpot_mean_s and summary.tpot is not None:
        return summary.tpot.mean < 0.25 * server.tpot_mean_s
    long = [r for r in requests if r.ok and r.output_tokens >= MIN_TOKENS]
    return bool(long) and sum(_burst(r) for r in long) >= 0.5 * len(long)


def run_marks(summary: ReplaySummary, requests: Sequence[RequestResult], server: ServerLatency | None,
              server_generation_tokens: int) -> tuple[str, ...]:
    marks = []
    if coalesced(summary, requests, server):
        marks.append(COALESCED)
    # Failed requests may have generated tokens the client never got a usage report for.
    if summary.failed == 0 and summary.output_tokens and server_generation_tokens >= 0 and (
            abs(server_generation_tokens - summary.output_tokens) > TOKEN_TOLERANCE * summary.output_tokens):
        marks.append(TOKEN_COUNT)
    return tuple(marks)


def repeats_disagree(tokens_per_s: Sequence[float], noise: float) -> bool:
    """Two or more replays whose scaled MAD is above ``noise`` of their median."""
    if len(tokens_per_s) < 2:
        return False
    median = statistics.median(tokens_per_s)
    return median > 0 and mad(tokens_per_s) / median > noise


def latency_trusted(marks: Sequence[str] | None) -> bool:
    return not any(m in LATENCY_MARKS for m in marks or ())
