"""Speculative decoding must not change greedy output: every replay of a config (and of the
k-by-batch-size schedule) is compared with the baseline's at temperature 0, and the first
token where they part is located.

A request whose output leaves the baseline's where the baseline itself hesitated (its top two
candidates within ``near_tie_margin`` of each other in log-probability) is a numeric near-tie:
batched verification in bf16 flips such ties without any fault of the drafter. Only the other
divergences, real changes, count against a config by default.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tuner.replay import RequestResult, first_different_token

# Log-probability lead of the baseline's token over its runner-up below which a divergence is a
# near-tie: 0.1 means the two were within about 10 % of each other's probability.
NEAR_TIE_MARGIN = 0.1


@dataclass(frozen=True)
class BaselineOutputs:
    """The baseline's greedy outputs (its first run): request id -> text digest, token ids and,
    per token, the lead of its log-probability over the runner-up's."""

    digests: dict[str, str]
    token_ids: dict[str, list[int]]
    margins: dict[str, list[float | None]] = field(default_factory=dict)


@dataclass(frozen=True)
class OutputCheck:
    match_rate: float  # share of compared greedy requests whose text equals the baseline's
    compared: int
    # The first request that differs and the index of its first different token (None when
    # only digests were kept), with the baseline's margin there where known;
    # {"request": id, "token": n, "margin": m, "near_tie": bool}.
    first_divergence: dict | None
    near_tie_rate: float = 0.0  # share that differ only from a near-tie of the baseline's

    @property
    def change_rate(self) -> float:
        """The share of real changes: differing requests that are not near-ties."""
        return max(0.0, 1 - self.match_rate - self.near_tie_rate)


def compare_outputs(baseline: BaselineOutputs, requests: Sequence[RequestResult],
                    near_tie_margin: float = NEAR_TIE_MARGIN) -> OutputCheck | None:
    """None when no greedy request of this run has a baseline output to compare with."""
    pairs = [r for r in requests if r.ok and r.greedy and r.text_digest and r.request_id in baseline.digests]
    if not pairs:
        return None
    where = []
    for r in pairs:
        if r.text_digest == baseline.digests[r.request_id]:
            continue
        expected = baseline.token_ids.get(r.request_id)
        token = first_different_token(expected, r.token_ids) if expected and r.token_ids else None
        lead = baseline.margins.get(r.request_id) or []
        margin = lead[token] if token is not None and token < len(lead) else None
        where.append({"request": r.request_id, "token": token, "margin": margin,
                      "near_tie": margin is not None and margin < near_tie_margin})
    real = [w for w in where if not w["near_tie"]]
    first = (real or where or [None])[0]  # a real change is the one worth showing
    return OutputCheck(1 - len(where) / len(pairs), len(pairs), first, (len(where) - len(real)) / len(pairs))


def worst(checks: Sequence[OutputCheck | None]) -> OutputCheck | None:
    """The trial's figure: the run with the most real changes, its first divergence naming the
    run's index."""
    indexed = [(i, c) for i, c in enumerate(checks) if c is not None]
    if not indexed:
        return None
    run, check = max(indexed, key=lambda ic: (ic[1].change_rate, -ic[1].match_rate))
    where = {**check.first_divergence, "run": run} if check.first_divergence else None
    return OutputCheck(check.match_rate, check.compared, where, check.near_tie_rate)


def output_changed(changed: float | None, max_change: float) -> bool:
    """Beyond the allowed share of really changed greedy requests (0 by default: any change)."""
    return changed is not None and changed > max_change + 1e-9


def divergence_text(where: dict | None, near_tie_rate: float | None = None) -> str:
    if not where:
        return ""
    token = f", token {where['token']}" if where.get("token") is not None else ""
    ties = f"; near-ties of the baseline's on {near_tie_rate:.0%}" if near_tie_rate else ""
    return f" (first at request {where['request']}{token}{ties})"
