"""Adaptive verification against the best fixed k of the same drafter, at the same loads.

With ``--adaptive-verification`` a study measures each drafter twice over: at each fixed k, and
with vLLM's ``enable_adaptive_verification`` (vLLM sizes each request's verified drafts, up to
k, from the drafter's confidence). The answer already picks the fastest of all; this says, per
drafter and load, what adaptive verification gave against that drafter's best fixed k, or why
it was not measured (vLLM's own reason, where it refused it).
"""

from __future__ import annotations

from collections.abc import Sequence

from tuner.engine.spec_config import ADAPTIVE_FIELD
from tuner.store import TrialRow


def _drafter(row: TrialRow) -> tuple[str, str | None]:
    config = row.config or {}
    return config.get("method", ""), config.get("model")


def _name(drafter: tuple[str, str | None]) -> str:
    method, draft = drafter
    return f"{method} draft={draft}" if draft else method


def adaptive_notes(rows: Sequence[TrialRow]) -> list[str]:
    """One sentence per drafter and load where the study tried adaptive verification."""
    adaptive = [r for r in rows if r.config and r.config.get(ADAPTIVE_FIELD)]
    notes = []
    for drafter in dict.fromkeys(_drafter(r) for r in adaptive):
        mine = [r for r in rows if r.config and _drafter(r) == drafter]
        tried = [r for r in mine if r.config.get(ADAPTIVE_FIELD)]
        measured = [r for r in tried if r.status == "complete" and r.tokens_per_s]
        if not measured:
            causes = [r.failure_cause for r in tried if r.failure_cause]
            why = f": {causes[0]}" if causes else ""
            notes.append(f"{_name(drafter)} with adaptive verification was not measured{why}")
            continue
        for load in dict.fromkeys(r.load for r in measured):
            best = max((r for r in measured if r.load == load), key=lambda r: r.tokens_per_s)
            fixed = [r for r in mine if r.load == load and not r.config.get(ADAPTIVE_FIELD)
                     and r.status == "complete" and r.tokens_per_s]
            if not fixed:
                notes.append(f"{best.label} at {load}: {best.tokens_per_s:.0f} tok/s; no fixed k of "
                             "this drafter was measured to hold it against")
                continue
            rival = max(fixed, key=lambda r: r.tokens_per_s)
            notes.append(f"adaptive verification, {best.label} at {load}: {best.tokens_per_s:.0f} tok/s "
                         f"against {rival.tokens_per_s:.0f} for its best fixed k={rival.config.get('num_speculative_tokens')} "
                         f"({best.tokens_per_s / rival.tokens_per_s:.2f}x)")
    return notes
