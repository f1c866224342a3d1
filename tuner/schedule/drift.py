"""Drift: live acceptance on production servers against the tuning's.

Per scheduled (model, workload type), the reference is the configuration the tuner recommends
(`tuner best`; its best speculative config when it says to keep speculation off) with the
acceptance rate and length that configuration reached when measured. Live figures (rate and
length per ``model_name`` and ``workload_type``) are read from Prometheus by
tuner.metrics.prometheus.

A live series is compared with the schedules whose traffic it carries: those with its served
model name (``--live-model-name``, default the model) and, where the series has a
``workload_type`` label, that type. One tuned type: its reference. Several (code and chat
behind one name, no label): the tuned traffic mix, i.e. what the counters would read if each
type's traffic ran at its own reference, each type weighted by its share of the traffic
(``shares``). Comparing one live figure with each type's reference instead reported drift for
the type with the higher acceptance whenever the other type's traffic pulled the sum down.

Drift is both falling below the reference by more than ``margin`` (a production k above the
tuned one lowers the rate but not the length, so one alone is no evidence), at every check for
``hold_s``. A window without drafts (no traffic) proves nothing and restarts the clock.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import lru_cache

import numpy as np

from tuner.errors import TunerError
from tuner.metrics.prometheus import TYPE_LABEL, Live, LiveAcceptance
from tuner.decide.answer import DEFAULT_NOISE
from tuner.decide.verdict import best_verdicts, verdicts
from tuner.store import ResultStore, ScheduleRow, TrialRow
from tuner.workload import load_workload
from tuner.workload.sample import output_lengths

log = logging.getLogger("tuner.serve")


@dataclass(frozen=True)
class Reference:
    schedule: ScheduleRow
    study_name: str
    config_label: str
    rate: float
    length: float


@dataclass(frozen=True)
class Finding:
    reference: Reference
    live: LiveAcceptance
    held_s: float
    margin: float
    live_type: str = ""  # the series' workload_type label; "" = the model's whole traffic

    @property
    def text(self) -> str:
        ref = self.reference
        series = ref.schedule.live_name + (f" ({TYPE_LABEL}={self.live_type})" if self.live_type else "")
        return (f"live acceptance of {series} (rate {self.live.rate:.2f}, length "
                f"{self.live.length:.2f}) stayed below the tuned {ref.config_label} (rate {ref.rate:.2f}, "
                f"length {ref.length:.2f}, {ref.study_name}) by more than {self.margin:.0%} for "
                f"{self.held_s:.0f} s")


def reference(schedule: ScheduleRow, trials: Sequence[TrialRow], rules: dict,
              noise: float = DEFAULT_NOISE) -> Reference | None:
    """The acceptance of what `tuner best` recommends, at the study's first load (the best
    speculative config's when it keeps speculation off); None without a speculative figure.
    ``rules``: the store's ``study_rules()``, required so that each study is judged under the
    rules it was run with (its output-change rule above all), never silently the defaults."""
    # A what-if study's acceptance is the synthetic profile it was given, not the draft's: never a reference.
    found = best_verdicts([v for v in verdicts(trials, rules, noise) if v.what_if is None])
    if not found:
        return None
    verdict = found[0]
    config = next(iter(verdict.rows), None)
    if config is None or config.acceptance_rate is None or config.mean_acceptance_length is None:
        return None
    return Reference(schedule, verdict.study_name, config.label, config.acceptance_rate,
                     config.mean_acceptance_length)


def references(store: ResultStore, schedules: Sequence[ScheduleRow]) -> list[Reference]:
    found = []
    rules = store.study_rules()
    for schedule in schedules:
        if not schedule.enabled:
            continue
        ref = reference(schedule, store.trials(model=schedule.model, workload_type=schedule.workload_type),
                        rules=rules)
        if ref is not None:
            found.append(ref)
    return found


# the tuned traffic mix

@lru_cache(maxsize=256)
def _volume(path: str, mtime_ns: int, size: int) -> tuple[int, float | None, float | None]:
    """(requests, output tokens or None where no line says, arrival span in s or None)."""
    requests = load_workload(path).requests
    lengths = output_lengths(requests)
    known = lengths[~np.isnan(lengths)]
    tokens = float(known.mean() * len(lengths)) if len(known) else None  # unknown lines: the file's mean
    arrivals = [r.arrival_s for r in requests]
    span = (max(arrivals) - min(arrivals)) if None not in arrivals else None
    return len(requests), tokens, span if span else None


def shares(schedules: Sequence[ScheduleRow]) -> list[float]:
    """Each schedule's share of the traffic, from its tuned workload: output tokens (output_tokens,
    else max_tokens) per second of the capture (arrival times; `workload sample` keeps the rate).
    Where some workload has no arrival times: output tokens; where some has no lengths: requests.
    Raises TunerError when a workload file cannot be read."""
    try:
        stats = [os.stat(s.workload) for s in schedules]
        volumes = [_volume(s.workload, st.st_mtime_ns, st.st_size) for s, st in zip(schedules, stats)]
    except OSError as exc:
        raise TunerError(f"cannot read workload {exc.filename} ({exc.strerror})") from None
    amounts = ([v[1] for v in volumes] if all(v[1] is not None for v in volumes)
               else [float(v[0]) for v in volumes])
    if all(v[2] is not None for v in volumes):
        amounts = [a / v[2] for a, v in zip(amounts, volumes)]
    total = sum(amounts)
    if not total > 0:
        raise TunerError("the tuned workloads have no output tokens to weigh the traffic mix by")
    return [a / total for a in amounts]


def mixed(parts: Sequence[tuple[Reference, float]]) -> tuple[float, float]:
    """(rate, length) the counters would read if each part's share of the output tokens ran at
    its reference: a draft step emits ``length`` tokens, so a share s takes s / length drafts, which
    accept length - 1 tokens each out of (length - 1) / rate drafted."""
    drafts = accepted = drafted = 0.0
    for ref, share in parts:
        n = share / ref.length
        drafts += n
        accepted += n * (ref.length - 1)
        # Nothing accepted: the draft tokens are unknown; one per draft is the least dilution.
        drafted += n * (ref.length - 1) / ref.rate if ref.rate > 0 else n
    return accepted / drafted, 1 + accepted / drafts


def combined(carried: Sequence[Reference]) -> Reference:
    """One reference for the schedules a live series carries: a single tuned type's own, else
    the tuned traffic mix. Schedules of the same model and type share one reference and share."""
    parts: dict[tuple[str, str], Reference] = {}
    for ref in sorted(carried, key=lambda r: r.schedule.id):
        parts.setdefault((ref.schedule.model, ref.schedule.workload_type), ref)
    if len(parts) == 1:
        return next(iter(parts.values()))
    refs = list(parts.values())
    weighted = list(zip(refs, shares([r.schedule for r in refs])))
    rate, length = mixed(weighted)
    label = ", ".join(f"{r.schedule.workload_type} {s:.0%} {r.config_label}" for r, s in weighted)
    studies = "; ".join(r.study_name for r in refs)[:500]  # the drift event's column holds 500
    return Reference(refs[0].schedule, studies, f"traffic mix ({label})", rate, length)


class DriftWatch:
    """Remembers since when each live series has been below the reference of what it carries."""

    def __init__(self, margin: float, hold_s: float):
        self.margin = margin
        self.hold_s = hold_s
        self.below_since: dict[tuple[str, str], datetime] = {}

    def is_below(self, ref: Reference, live: LiveAcceptance) -> bool:
        return (live.rate < ref.rate * (1 - self.margin)
                and live.length < ref.length * (1 - self.margin))

    def check(self, now: datetime, refs: Sequence[Reference], live: Live) -> list[Finding]:
        """One finding per schedule behind a series that stayed below for ``hold_s``."""
        findings = []
        below = set()
        for model_name, by_type in live.items():
            for live_type, seen in by_type.items():
                carried = [r for r in refs if r.schedule.live_name == model_name
                           and live_type in ("", r.schedule.workload_type)]
                if not carried:
                    continue  # a type or model nobody tuned
                try:
                    ref = combined(carried)
                except TunerError as exc:
                    log.warning("drift check of %s skipped: %s", model_name, exc)
                    continue
                if not self.is_below(ref, seen):
                    continue
                key = (model_name, live_type)
                below.add(key)
                since = self.below_since.setdefault(key, now)
                held = (now - since).total_seconds()
                if held >= self.hold_s:
                    findings += [Finding(replace(ref, schedule=r.schedule), seen, held, self.margin,
                                         live_type) for r in sorted(carried, key=lambda r: r.schedule.id)]
                    self.below_since[key] = now  # another full period before the next finding
        for key in set(self.below_since) - below:
            del self.below_since[key]
        return findings
