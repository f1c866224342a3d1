"""Which figures of a replay cannot be trusted, and why.

A figure is marked, not dropped: it stays in the table and the database with its mark, and a
marked latency is never turned into a percentage. The marks:

- coalesced stream: the client saw a request's tokens arrive in one burst (TPOT near 0, TTFT
  near e2e), so its TPOT and TTFT say when the client read the socket, not when the server
  produced the tokens. A busy host does this: the client's event loop stalls. The
  server's own per-request histograms (``/metrics``) are the cross-check.
- client lagged the server: the client's median TTFT or e2e is far above the server's own
  median for the same requests (seen: 427 ms against 22 ms on a busy 2-core host). The client
  waited on its own CPU, not on the server.
- tokens/s bound by the client: a replay still lagging or coalesced after it was replayed once
  more. Its tokens/s says how fast this client read, not how fast the server served.
- token count: the client's output tokens (from the usage reports) disagree with the server's
  generation-token counter over the same window: requests the client did not see end, or
  traffic that was not the replay's.
- repeats disagree: the replays of one config spread by more than the noise.
- acceptance disagrees with /metrics: the drafts the replay's requests accepted, added up from
  their streams (tuner.replay.acceptance), are not what the server's counters say over the same
  window: a stream that coalesced steps, requests the client did not see to the end, or traffic
  that was not the replay's. The acceptance figures come from /metrics either way; the requests'
  own (per request, by context length) are then not trusted.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from tuner.metrics import Acceptance, ServerLatency
from tuner.replay import ReplaySummary, RequestResult
from tuner.replay.acceptance import RequestsAcceptance
from tuner.decide.stats import mad

COALESCED = "coalesced stream"
CLIENT_LAG = "client lagged the server"
CLIENT_BOUND = "tokens/s bound by the client"
TOKEN_COUNT = "token count disagrees with the server"
REPEATS_DISAGREE = "repeats disagree"
ACCEPTANCE_DISAGREES = "acceptance disagrees with /metrics"
# Marks of one replay that another replay on the same server can clear (a stall, stray traffic).
# Not ACCEPTANCE_DISAGREES: the acceptance figures come from the counters either way; what it
# marks is the requests' own view (by context length), not worth a replay of its own.
REMEASURABLE = (COALESCED, CLIENT_LAG, TOKEN_COUNT)
LATENCY_MARKS = (COALESCED, CLIENT_LAG, CLIENT_BOUND)
CLIENT_MARKS = (COALESCED, CLIENT_LAG)  # the client, not the server, set the pace

MIN_TOKENS = 8  # a burst of fewer tokens is what a fast server sends anyway
BURST_SHARE = 0.02  # decode time under 2 % of a request's e2e counts as one burst
TOKEN_TOLERANCE = 0.01
# The requests' accepted drafts against /metrics: within 2 % (and 2 tokens); vLLM's own
# per-request counts and its counters count the same steps, so they agree exactly when nothing
# else ran.
ACCEPTANCE_TOLERANCE = 0.02
ACCEPTANCE_SLACK = 2
# The client lags when its median is above twice the upper edge of the server's median bucket
# plus this much (HTTP, detokenizing and streaming add a few ms, not tens).
LAG_FACTOR = 2.0
LAG_SLACK_S = 0.05


def _burst(r: RequestResult) -> bool:
    return (r.ok and r.output_tokens >= MIN_TOKENS and r.e2e_s and r.ttft_s is not None
            and (r.e2e_s - r.ttft_s) < BURST_SHARE * r.e2e_s)


def coalesced(summary: ReplaySummary, requests: Sequence[RequestResult],
              server: ServerLatency | None) -> bool:
    """Half the multi-token requests arrived in one burst (judged per request), or the client's
    median TPOT is under a quarter of the lower edge of the server's median bucket."""
    long = [r for r in requests if r.ok and r.output_tokens >= MIN_TOKENS]
    if long and sum(_burst(r) for r in long) >= 0.5 * len(long):
        return True
    bounds = server.median_bounds.get("tpot") if server is not None else None
    return bool(bounds and summary.tpot is not None and summary.tpot.p50 < 0.25 * bounds[0])


def client_lagged(summary: ReplaySummary, server: ServerLatency | None) -> bool:
    """The client's median TTFT or e2e is above LAG_FACTOR times the upper edge of the server's
    median bucket for the same requests, plus LAG_SLACK_S."""
    for key, client in (("ttft", summary.ttft), ("e2e", summary.e2e)):
        bounds = server.median_bounds.get(key) if server is not None else None
        if client is not None and bounds and math.isfinite(bounds[1]) and (
                client.p50 > LAG_FACTOR * bounds[1] + LAG_SLACK_S):
            return True
    return False


def _off(got: int, expected: int) -> bool:
    return abs(got - expected) > max(ACCEPTANCE_SLACK, ACCEPTANCE_TOLERANCE * expected)


def acceptance_disagrees(from_requests: RequestsAcceptance | None, counters: Acceptance | None) -> bool:
    """The requests' own acceptance against the server's counters over the same window: vLLM's
    per-request counts (steps, drafts proposed and accepted) where it sent them, exactly; and the
    drafts accepted as the streams show them. The streams may show fewer: vLLM counts the drafts
    its last step accepted past a request's max_tokens, which are never sent (up to k per
    request; seen: 13 of 349 for eagle3 k=3 over 8 requests). More, or fewer beyond that, is a
    coalesced stream, traffic that was not the replay's or streams the client did not see. No
    verdict where either side is missing."""
    if from_requests is None or counters is None:
        return False
    if from_requests.server_steps is not None and (
            _off(from_requests.server_steps, counters.drafts)
            or _off(from_requests.server_accepted or 0, counters.accepted_tokens)
            or _off(from_requests.server_drafted or 0, counters.draft_tokens)):
        return True
    k = len(counters.per_position) or math.ceil(counters.draft_tokens / max(1, counters.drafts))
    past_the_end = k * from_requests.requests
    stream, counted = from_requests.stream_accepted, counters.accepted_tokens
    return _off(stream, counted) and not counted - past_the_end <= stream <= counted


def run_marks(summary: ReplaySummary, requests: Sequence[RequestResult], server: ServerLatency | None,
              server_generation_tokens: int, counters: Acceptance | None = None,
              from_requests: RequestsAcceptance | None = None) -> tuple[str, ...]:
    marks = []
    if coalesced(summary, requests, server):
        marks.append(COALESCED)
    if client_lagged(summary, server):
        marks.append(CLIENT_LAG)
    # Failed requests may have generated tokens the client never got a usage report for.
    if summary.failed == 0 and summary.output_tokens and server_generation_tokens >= 0 and (
            abs(server_generation_tokens - summary.output_tokens) > TOKEN_TOLERANCE * summary.output_tokens):
        marks.append(TOKEN_COUNT)
    if summary.failed == 0 and acceptance_disagrees(from_requests, counters):
        marks.append(ACCEPTANCE_DISAGREES)
    return tuple(marks)


def repeats_disagree(tokens_per_s: Sequence[float], noise: float) -> bool:
    """Two or more replays whose scaled MAD is above ``noise`` of their median."""
    if len(tokens_per_s) < 2:
        return False
    median = statistics.median(tokens_per_s)
    return median > 0 and mad(tokens_per_s) / median > noise


def still_client_bound(marks: Sequence[str]) -> tuple[str, ...]:
    """A replay replayed once more for a client mark that it still carries: its tokens/s is the
    client's pace too."""
    return (*marks, CLIENT_BOUND) if any(m in CLIENT_MARKS for m in marks) else tuple(marks)


def latency_trusted(marks: Sequence[str] | None) -> bool:
    return not any(m in LATENCY_MARKS for m in marks or ())
