"""Drift: live acceptance on production servers, read from Prometheus, against the tuning's.

Per scheduled (model, workload type), the reference is the configuration the tuner recommends
(`tuner best`; its best speculative config when it says to keep speculation off) with the
acceptance rate and length that configuration reached when measured. Live figures come from
PromQL over vLLM's counters, summed per ``model_name`` label:

    rate   = increase(accepted tokens) / increase(draft tokens)
    length = 1 + increase(accepted tokens) / increase(drafts)

Drift is both falling below the reference by more than ``margin`` (a production k above the
tuned one lowers the rate but not the length, so one alone is no evidence), at every check for
``hold_s``. A window without drafts (no traffic) proves nothing and restarts the clock.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from tuner.errors import TunerError
from tuner.search.answer import DEFAULT_NOISE
from tuner.search.verdict import best_verdicts, verdicts
from tuner.store import ResultStore, ScheduleRow, TrialRow

ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
DRAFTS = "vllm:spec_decode_num_drafts_total"


@dataclass(frozen=True)
class LiveAcceptance:
    rate: float
    length: float


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

    @property
    def text(self) -> str:
        ref = self.reference
        return (f"live acceptance of {ref.schedule.live_name} (rate {self.live.rate:.2f}, length "
                f"{self.live.length:.2f}) stayed below the tuned {ref.config_label} (rate {ref.rate:.2f}, "
                f"length {ref.length:.2f}, {ref.study_name}) by more than {self.margin:.0%} for "
                f"{self.held_s:.0f} s")


def queries(window_s: float) -> dict[str, str]:
    w = f"[{max(1, round(window_s))}s]"

    def total(metric: str) -> str:
        return f"sum by (model_name) (increase({metric}{w}))"

    return {"rate": f"{total(ACCEPTED)} / {total(DRAFT_TOKENS)}",
            "length": f"1 + {total(ACCEPTED)} / {total(DRAFTS)}"}


class PrometheusSource:
    """Live acceptance per model_name from a Prometheus server (prometheus-api-client)."""

    def __init__(self, url: str, window_s: float):
        from prometheus_api_client import PrometheusConnect

        self.url = url
        self.window_s = window_s
        self.client = PrometheusConnect(url=url, disable_ssl=True)

    def read(self) -> dict[str, LiveAcceptance]:
        values: dict[str, dict[str, float]] = {}
        for name, query in queries(self.window_s).items():
            try:
                result = self.client.custom_query(query=query)
            except Exception as exc:  # the client raises its own, requests' and JSON errors
                raise TunerError(f"cannot query Prometheus at {self.url} ({exc.__class__.__name__}: "
                                 f"{exc}); check --prometheus") from None
            for series in result:
                value = float(series["value"][1])
                if math.isfinite(value):
                    values.setdefault(series["metric"].get("model_name", ""), {})[name] = value
        return {model: LiveAcceptance(v["rate"], v["length"])
                for model, v in values.items() if "rate" in v and "length" in v}


def reference(schedule: ScheduleRow, trials: Sequence[TrialRow], noise: float = DEFAULT_NOISE,
              rules: dict | None = None) -> Reference | None:
    """The acceptance of what `tuner best` recommends, at the study's first load (the best
    speculative config's when it keeps speculation off); None without a speculative figure."""
    found = best_verdicts(verdicts(trials, rules or {}, noise))
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


class DriftWatch:
    """Remembers since when each schedule's live acceptance has been below its reference."""

    def __init__(self, margin: float, hold_s: float):
        self.margin = margin
        self.hold_s = hold_s
        self.below_since: dict[int, datetime] = {}

    def is_below(self, ref: Reference, live: LiveAcceptance) -> bool:
        return (live.rate < ref.rate * (1 - self.margin)
                and live.length < ref.length * (1 - self.margin))

    def check(self, now: datetime, refs: Sequence[Reference],
              live: dict[str, LiveAcceptance]) -> list[Finding]:
        findings = []
        for ref in refs:
            key = ref.schedule.id
            seen = live.get(ref.schedule.live_name)
            if seen is None or not self.is_below(ref, seen):
                self.below_since.pop(key, None)
                continue
            since = self.below_since.setdefault(key, now)
            held = (now - since).total_seconds()
            if held >= self.hold_s:
                findings.append(Finding(ref, seen, held, self.margin))
                self.below_since[key] = now  # another full period before the next finding
        return findings
