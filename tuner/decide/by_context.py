"""Where a configuration's acceptance falls as the context grows, and where it stops paying.

A trial's tokens per decode step (1 + accepted drafts) per context-length bucket comes from its
requests' streams (tuner/replay/acceptance.py), and so does each bucket's decode rate per request
(tokens over the time between chunks). Where the baseline's trial has its own rate in the same
buckets, the config stops paying at the first length where its rate is below the baseline's:
measured. Otherwise an estimate: at the trial's own step cost, tokens/s follows the tokens per
step, so the config is as fast as the baseline where its tokens per step falls to ``overall /
speedup`` (a step's cost grows with the context too, for the baseline as well), said as one.
"""

from __future__ import annotations

from tuner.decide.marks import ACCEPTANCE_DISAGREES
from tuner.store import TrialRow

MIN_STEPS = 20  # a bucket with fewer steps says too little to compare


def _span(bucket: dict) -> str:
    return f"{bucket['from']}-{bucket['to'] - 1}"


def _measured_speedups(buckets: list[dict], baseline: TrialRow) -> list[tuple[dict, float]] | None:
    """Each bucket's decode rate over the baseline's in the same bucket, where both were timed."""
    base = {(b["from"], b["to"]): b for b in baseline.acceptance_by_context or ()
            if b["steps"] >= MIN_STEPS and b.get("tokens_per_s")}
    pairs = [(b, b["tokens_per_s"] / base[(b["from"], b["to"])]["tokens_per_s"]) for b in buckets
             if b.get("tokens_per_s") and (b["from"], b["to"]) in base]
    return pairs if len(pairs) == len(buckets) else None


def context_note(row: TrialRow, baseline: TrialRow | None, noise: float) -> str | None:
    """One sentence where ``row``'s tokens per step falls by more than ``noise`` from its
    shortest contexts to a longer bucket; None where it holds (or too few steps say)."""
    if ACCEPTANCE_DISAGREES in row.marks:  # the streams did not add up to the counters
        return None
    buckets = [b for b in row.acceptance_by_context or () if b["steps"] >= MIN_STEPS]
    if len(buckets) < 2 or not row.tokens_per_s or baseline is None or not baseline.tokens_per_s:
        return None
    first, worst = buckets[0], min(buckets[1:], key=lambda b: b["tokens_per_step"])
    if worst["tokens_per_step"] >= first["tokens_per_step"] * (1 - noise):
        return None
    text = (f"{row.label}'s tokens per step at {row.load} fall with the context: "
            f"{first['tokens_per_step']:.2f} at {_span(first)} tokens, {worst['tokens_per_step']:.2f} "
            f"at {_span(worst)}")
    if (speedups := _measured_speedups(buckets, baseline)) is not None:
        rates = ", ".join(f"{x:.2f}x at {_span(b)}" for b, x in speedups)
        stops = next((b for b, x in speedups if x < 1), None)
        if stops is None:
            return f"{text}; it still pays at every length measured (its decode rate per request against the baseline's: {rates})"
        return (f"{text}; from about {stops['from']} tokens of context it stops paying (its decode rate "
                f"per request against the baseline's at the same lengths: {rates})")
    overall = sum(b["tokens_per_step"] * b["steps"] for b in buckets) / sum(b["steps"] for b in buckets)
    break_even = overall / (row.tokens_per_s / baseline.tokens_per_s)
    stops = next((b for b in buckets if b["tokens_per_step"] < break_even), None)
    if stops is None:
        return f"{text}; it still pays at every length measured (estimated break-even {break_even:.2f})"
    return (f"{text}; from about {stops['from']} tokens of context it stops paying (below the "
            f"estimated break-even of {break_even:.2f} tokens per step)")
