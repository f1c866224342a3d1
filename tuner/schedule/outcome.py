"""What a finished tuning job changed: its study's answer against the study before it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tuner.search.answer import Answer, answers_per_study
from tuner.store import TrialRow


@dataclass(frozen=True)
class Outcome:
    kind: str  # first, new best, unchanged, regressed
    detail: str


def effective_speedup(answer: Answer) -> float:
    """Of the configuration the answer recommends: 1.0 when it keeps speculation off."""
    return 1.0 if answer.keep_speculation_off else (answer.speedup or 1.0)


def recommended(answer: Answer) -> str:
    return "speculation off" if answer.keep_speculation_off else answer.winner.label


def compare(previous: Answer | None, new: Answer, noise: float) -> Outcome:
    """Regressed when the recommended configuration is slower relative to its baseline by more
    than ``noise``; new best when another configuration is recommended; else unchanged."""
    now = f"{recommended(new)}: {effective_speedup(new):.2f}x"
    if previous is None:
        return Outcome("first", f"{now} (no earlier study of this model, workload type and load)")
    before = f"{recommended(previous)}: {effective_speedup(previous):.2f}x in {previous.study_name}"
    if effective_speedup(new) < effective_speedup(previous) * (1 - noise):
        return Outcome("regressed", f"{now}, below {before} by more than the noise ({noise:.0%})")
    if new.winner.config != previous.winner.config:
        return Outcome("new best", f"{now}, was {before}")
    return Outcome("unchanged", f"{now}, as {before}")


def study_outcome(study_name: str, history: Sequence[TrialRow], noise: float) -> Outcome | None:
    """``history``: every trial of the study's model and workload type. Per load, the study is
    compared with the latest other study of that load that finished before it; over several
    loads, a regression anywhere wins, then a change. None when the study has no answer."""
    answers = answers_per_study(history, noise)
    mine = [a for a in answers if a.study_name == study_name]
    if not mine:
        return None
    started = min((t.finished_at for t in history if t.study_name == study_name and t.finished_at),
                  default=None)
    results = []
    for new in mine:
        earlier = [a for a in answers if a.study_name != study_name and a.load == new.load
                   and _finished(a) is not None and (started is None or _finished(a) < started)]
        previous = max(earlier, key=_finished, default=None)
        results.append(compare(previous, new, noise))
    for kind in ("regressed", "new best", "unchanged", "first"):
        picked = [r for r in results if r.kind == kind]
        if picked:
            return Outcome(kind, "; ".join(r.detail for r in picked))
    return None


def _finished(answer: Answer):
    return answer.baseline.finished_at
