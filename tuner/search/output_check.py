"""Speculative decoding must not change greedy output: every replay of a config (and of the
k-by-batch-size schedule) is compared with the baseline's at temperature 0, and the first
token where they part is located."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tuner.replay import RequestResult


@dataclass(frozen=True)
class BaselineOutputs:
    """The baseline's greedy outputs (its first run): request id -> text digest and token ids."""

    digests: dict[str, str]
    token_ids: dict[str, list[int]]


@dataclass(frozen=True)
class OutputCheck:
    match_rate: float  # share of compared greedy requests whose text equals the baseline's
    compared: int
    # The first request that differs and the index of its first different token (None when
    # only digests were kept); {"request": id, "token": n}.
    first_divergence: dict | None


def first_different_token(expected: Sequence[int], got: Sequence[int]) -> int:
    for i, (a, b) in enumerate(zip(expected, got)):
        if a != b:
            return i
    return min(len(expected), len(got))


def compare_outputs(baseline: BaselineOutputs, requests: Sequence[RequestResult]) -> OutputCheck | None:
    """None when no greedy request of this run has a baseline output to compare with."""
    pairs = [r for r in requests if r.ok and r.greedy and r.text_digest and r.request_id in baseline.digests]
    if not pairs:
        return None
    differ = [r for r in pairs if r.text_digest != baseline.digests[r.request_id]]
    first = None
    if differ:
        r = differ[0]
        expected = baseline.token_ids.get(r.request_id)
        token = first_different_token(expected, r.token_ids) if expected and r.token_ids else None
        first = {"request": r.request_id, "token": token}
    return OutputCheck(1 - len(differ) / len(pairs), len(pairs), first)


def worst(checks: Sequence[OutputCheck | None]) -> tuple[float | None, dict | None]:
    """The trial's figure: the run that changed most, with its first divergence and run index."""
    indexed = [(i, c) for i, c in enumerate(checks) if c is not None]
    if not indexed:
        return None, None
    run, check = min(indexed, key=lambda ic: ic[1].match_rate)
    where = {**check.first_divergence, "run": run} if check.first_divergence else None
    return check.match_rate, where


def output_changed(match_rate: float | None, max_change: float) -> bool:
    """Beyond the allowed share of changed greedy requests (0 by default: any change)."""
    return match_rate is not None and (1 - match_rate) > max_change + 1e-9


def divergence_text(where: dict | None) -> str:
    if not where:
        return ""
    token = f", token {where['token']}" if where.get("token") is not None else ""
    return f" (first at request {where['request']}{token})"
