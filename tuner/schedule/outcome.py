"""What a finished tuning job changed: its study's verdict against the study before it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tuner.decide.verdict import NONE, Verdict, verdicts
from tuner.store import TrialRow


@dataclass(frozen=True)
class Outcome:
    kind: str  # first, new best, unchanged, regressed, no winner
    detail: str


def compare(previous: Verdict | None, new: Verdict, noise: float) -> Outcome:
    """Regressed when what is recommended is slower relative to its baseline by more than
    ``noise``; new best when something else is recommended; else unchanged. A study whose
    targets nothing met has no winner to compare."""
    if new.kind == NONE:
        return Outcome("no winner", new.headline)
    now = f"{new.recommended}: {new.effective_speedup:.2f}x"
    if previous is None:
        return Outcome("first", f"{now} (no earlier study of this model, workload type and load)")
    before = f"{previous.recommended}: {previous.effective_speedup:.2f}x in {previous.study_name}"
    if new.effective_speedup < previous.effective_speedup * (1 - noise):
        return Outcome("regressed", f"{now}, below {before} by more than the noise ({noise:.0%})")
    if (new.kind, new.deployed) != (previous.kind, previous.deployed):
        return Outcome("new best", f"{now}, was {before}")
    return Outcome("unchanged", f"{now}, as {before}")


def study_outcome(study_name: str, history: Sequence[TrialRow], noise: float,
                  rules: dict[str, dict[str, Any]] | None = None) -> Outcome | None:
    """``history``: every trial of the study's model and workload type; ``rules``: each study's
    stored rules (``ResultStore.study_rules``); ``noise``: for a study that stored none. The study's verdict is compared with that of the
    latest other study of the same loads that finished before it. None when it has no verdict."""
    found = verdicts(history, rules or {}, noise)
    mine = next((v for v in found if v.study_name == study_name), None)
    if mine is None:
        return None
    finished = _finished_by_study(history)
    started = min((t.finished_at for t in history if t.study_name == study_name and t.finished_at),
                  default=None)
    earlier = [v for v in found if v.study_name != study_name and v.load == mine.load
               and finished.get(v.study_name) is not None
               and (started is None or finished[v.study_name] < started)]
    previous = max(earlier, key=lambda v: finished[v.study_name], default=None)
    # "Regressed" is beyond the study's own --noise, the margin its verdict was decided under.
    own = (rules or {}).get(study_name, {}).get("noise")
    return compare(previous, mine, noise if own is None else own)


def _finished_by_study(history: Sequence[TrialRow]) -> dict[str, datetime]:
    """When each study's baseline finished (its first measurement of record)."""
    found: dict[str, datetime] = {}
    for t in history:
        if t.config is None and t.finished_at and t.kind == "study":
            found[t.study_name] = max(found.get(t.study_name, t.finished_at), t.finished_at)
    return found
