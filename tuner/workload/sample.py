"""Pick a smaller replay set that keeps the shape of a workload over time and its lengths."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from tuner.errors import UsageError
from tuner.workload.model import Request, Workload
from tuner.workload.stats import char_lengths

CANDIDATES = 32  # enough draws that one usually matches the lengths well; cheap to score


def ks_distance(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sample Kolmogorov-Smirnov distance: the largest gap between the two empirical
    CDFs (0 = same distribution, 1 = disjoint). NaNs are dropped; an empty side is 1 away
    from a non-empty one."""
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    x, y = np.sort(x[~np.isnan(x)]), np.sort(y[~np.isnan(y)])
    if len(x) == 0 or len(y) == 0:
        return 0.0 if len(x) == len(y) else 1.0
    points = np.concatenate([x, y])
    cdf_x = np.searchsorted(x, points, side="right") / len(x)
    cdf_y = np.searchsorted(y, points, side="right") / len(y)
    return float(np.max(np.abs(cdf_x - cdf_y)))


def output_lengths(requests: Sequence[Request]) -> np.ndarray:
    """output_tokens, else max_tokens (the cap a replay asks for), else NaN."""
    return np.array([
        r.output_tokens if r.output_tokens is not None
        else r.max_tokens if r.max_tokens is not None else np.nan
        for r in requests
    ], dtype=float)


def sample_workload(workload: Workload, n: int, seed: int) -> list[Request]:
    """A representative ``n``-request replay set of ``workload``; the same seed gives the same set.

    Method: order the requests by arrival (file order when some line has no arrival_s), cut
    them into ``n`` consecutive blocks of almost equal size (sizes differ by at most one)
    and pick one request per block at random, so the sample spreads over the whole trace.
    ``CANDIDATES`` (32) such samples are drawn from ``numpy.random.default_rng(seed)``; each
    is scored by the larger of two two-sample Kolmogorov-Smirnov distances to the full file,
    on prompt length (characters) and on output length (output_tokens, else max_tokens),
    and the smallest score wins (the earliest draw on a tie).

    Arrival times of the sample are shifted so that it starts at 0 and multiplied by
    n / len(workload): the sample keeps the original request rate and the same shape over
    time. Ids, lines and every other field are kept. ``n >= len(workload)`` returns all
    requests unchanged.
    """
    if n < 1:
        raise UsageError(f"the sample size must be at least 1, got {n}.")
    requests = list(workload.requests)
    if n >= len(requests):
        return requests
    if workload.has_arrivals:
        # stable: requests that arrive together stay in file order
        requests.sort(key=lambda r: r.arrival_s or 0.0)

    prompts = np.array(char_lengths(requests), dtype=float)
    outputs = output_lengths(requests)
    blocks = np.array_split(np.arange(len(requests)), n)
    rng = np.random.default_rng(seed)
    best, best_score = np.empty(0, dtype=int), np.inf
    for _ in range(CANDIDATES):
        picked = np.array([block[rng.integers(len(block))] for block in blocks])
        score = max(ks_distance(prompts[picked], prompts), ks_distance(outputs[picked], outputs))
        if score < best_score:
            best, best_score = picked, score

    chosen = [requests[i] for i in best]
    if not workload.has_arrivals:
        return chosen
    first = chosen[0].arrival_s or 0.0
    scale = n / len(requests)
    # microseconds: exact enough for a schedule, and no 0.30000000000000004 in the file
    return [replace(r, arrival_s=round(((r.arrival_s or 0.0) - first) * scale, 6)) for r in chosen]
