"""Acceptance figures from counter deltas over one measured window.

Formulas (see shared notes/formulas.md): acceptance rate = A / T, mean acceptance length
= 1 + A / D, per-position acceptance p_i = A_i / D (unconditional, so non-increasing in i).
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.metrics.scrape import SpecCounters


@dataclass(frozen=True)
class Acceptance:
    drafts: int
    draft_tokens: int
    accepted_tokens: int
    acceptance_rate: float
    mean_acceptance_length: float
    per_position: tuple[float, ...]

    def acceptance_length_at(self, k: int) -> float:
        """Predicted mean acceptance length for a smaller k: tau(k) = 1 + sum_{i<k} p_i."""
        return 1.0 + sum(self.per_position[:k])


def acceptance_between(
    before: SpecCounters, after: SpecCounters, k: int | None = None
) -> Acceptance | None:
    """Acceptance over the window between two scrapes; None without speculation or drafts.

    ``k`` pads the per-position figures to k positions where the server reported fewer.
    """
    if not after.spec_present:
        return None
    drafts = after.drafts - before.drafts
    if drafts <= 0:
        return None
    draft_tokens = after.draft_tokens - before.draft_tokens
    accepted = after.accepted - before.accepted
    positions = range(max(max(after.accepted_per_pos, default=-1) + 1, k or 0))
    # A position first appears in /metrics when it first accepts: missing before means 0.
    per_pos = tuple(
        (after.accepted_per_pos.get(i, 0.0) - before.accepted_per_pos.get(i, 0.0)) / drafts
        for i in positions
    )
    return Acceptance(
        drafts=int(drafts),
        draft_tokens=int(draft_tokens),
        accepted_tokens=int(accepted),
        acceptance_rate=accepted / draft_tokens if draft_tokens else 0.0,
        mean_acceptance_length=1.0 + accepted / drafts,
        per_position=per_pos,
    )
