"""Latency targets (``--slo "tpot_p99_ms<=40"``) and the Pareto front of tokens/s versus p99 TPOT.

A configuration that breaks a target is infeasible: it is told to Optuna as a violated
constraint and can never be the answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from tuner.errors import UsageError
from tuner.store import TrialRow

_PATTERN = re.compile(r"^\s*(ttft|tpot|e2e)_(p50|p90|p99)_(ms|s)\s*<=\s*([0-9]*\.?[0-9]+)\s*$")
_STORED = {"ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99", "e2e_p99"}


@dataclass(frozen=True)
class Slo:
    metric: str  # like tpot_p99
    limit_s: float
    text: str

    def violation(self, row: TrialRow) -> float:
        """How far over the target, relative to it: <= 0 is met. No figure counts as broken."""
        value = row.latency(self.metric)
        return 1.0 if value is None else value / self.limit_s - 1.0

    def met(self, row: TrialRow) -> bool:
        return self.violation(row) <= 0


def parse_slo(text: str) -> Slo:
    match = _PATTERN.match(text)
    if not match:
        raise UsageError(f"--slo {text!r} is not a latency target; write it like "
                         "\"tpot_p99_ms<=40\" (ttft|tpot|e2e, p50|p90|p99, ms|s)")
    name, pct, unit, number = match.groups()
    metric = f"{name}_{pct}"
    if metric not in _STORED:
        raise UsageError(f"--slo {text!r}: {metric} is not stored; use one of "
                         + ", ".join(sorted(_STORED)))
    limit = float(number) / (1000.0 if unit == "ms" else 1.0)
    if limit <= 0:
        raise UsageError(f"--slo {text!r}: the limit must be > 0")
    return Slo(metric, limit, text.strip())


def parse_slos(texts: Sequence[str]) -> tuple[Slo, ...]:
    return tuple(parse_slo(t) for t in texts)


def worst_violation(row: TrialRow, slos: Sequence[Slo]) -> float:
    """How far ``row`` breaks its worst target, relative to it (<= 0: every target met)."""
    return max(slo.violation(row) for slo in slos)


def feasible(row: TrialRow, slos: Sequence[Slo]) -> bool:
    return all(slo.met(row) for slo in slos)


def pareto_front(rows: Sequence[TrialRow]) -> list[TrialRow]:
    """Completed configs not beaten on both higher tokens/s and lower p99 TPOT, fastest first."""
    done = [r for r in rows if r.status == "complete" and r.tokens_per_s and r.tpot_p99_s is not None]
    front = [r for r in done if not any(
        o.tokens_per_s >= r.tokens_per_s and o.tpot_p99_s <= r.tpot_p99_s
        and (o.tokens_per_s > r.tokens_per_s or o.tpot_p99_s < r.tpot_p99_s) for o in done)]
    return sorted(front, key=lambda r: -r.tokens_per_s)
