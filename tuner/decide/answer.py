"""The answer at one load: the fastest configuration, if it beats the baseline by more than
the measurement noise; otherwise the answer is to keep speculation off. A config that breaks a
latency target, or changed greedy output beyond the allowed share, is never the answer.
``tuner.decide.verdict`` turns the answers of a study's loads into the one thing to deploy."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from tuner.errors import TunerError
from tuner.decide.stats import DEFAULT_RUN_NOISE
from tuner.decide.output_check import output_changed
from tuner.decide.slo import Slo, feasible, worst_violation
from tuner.decide.stats import RepeatStats, relative_precision, repeat_stats, shown_equal, tied
from tuner.store import TrialRow
from tuner.decide.marks import latency_trusted

DEFAULT_NOISE = 0.05  # the run-to-run spread of a shared host (docs/lab/notes-from-code.md); repeats measure it


def trial_stats(t: TrialRow) -> RepeatStats:
    low, high = t.tokens_per_s_ci or (t.tokens_per_s, t.tokens_per_s)
    return RepeatStats(n=t.repeats, median=t.tokens_per_s, mad=t.tokens_per_s_mad or 0.0,
                       ci_low=low, ci_high=high)


def pooled(rows: Sequence[TrialRow]) -> list[TrialRow]:
    """``rows`` with the completed study rows of one config at one load, measured on more than
    one server (a second start of an undecided contender), made one: its figures from all their
    replays together, greedy output as the worst of them kept it, every mark of any. Latencies
    and acceptance are the latest start's. It stands where the latest of them stood."""
    def key(r: TrialRow) -> tuple[str, str] | None:
        if r.kind != "study" or r.status != "complete" or r.tokens_per_s is None or not r.replays:
            return None
        return json.dumps(r.config, sort_keys=True), r.load

    groups: dict[tuple[str, str], list[TrialRow]] = {}
    for r in rows:
        if (k := key(r)) is not None:
            groups.setdefault(k, []).append(r)
    found = []
    for r in rows:
        group = groups.get(key(r)) if key(r) is not None else None
        if group is None or len(group) == 1:
            found.append(r)
        elif r is group[-1]:
            found.append(_pool(group))
    return found


def _pool(group: Sequence[TrialRow]) -> TrialRow:
    values = [v for r in group for v in r.replays]
    stats = repeat_stats(values)
    precision = relative_precision(values)
    checked = [r for r in group if r.greedy_match_rate is not None]
    worst = min(checked, key=lambda r: r.greedy_match_rate) if checked else group[-1]  # its greedy check
    return replace(group[-1], tokens_per_s=stats.median, tokens_per_s_mad=stats.mad,
                   tokens_per_s_ci=(stats.ci_low, stats.ci_high), repeats=stats.n,
                   tokens_per_s_precision=precision if math.isfinite(precision) else None,
                   greedy_match_rate=worst.greedy_match_rate, greedy_near_tie_rate=worst.greedy_near_tie_rate,
                   first_divergence=worst.first_divergence,
                   marks=tuple(dict.fromkeys(m for r in group for m in r.marks)),
                   replays=tuple(values), starts=sum(r.starts for r in group))


def trial_k(t: TrialRow) -> int:
    return 0 if t.config is None else int(t.config.get("num_speculative_tokens", 0))


@dataclass(frozen=True)
class Answer:
    study_name: str
    model: str
    workload_type: str
    load: str
    baseline: TrialRow
    best: TrialRow | None  # the eligible speculative config with the highest score, winning or not
    winner: TrialRow | None  # the baseline when speculation does not clearly pay; None: no config meets the targets
    noise: float
    slos: tuple[Slo, ...] = ()
    closest: TrialRow | None = None  # with no winner: the config that breaks the targets least
    output_changed: tuple[TrialRow, ...] = ()  # fast enough to count, but changed greedy output
    # Neither separated from the winner nor shown equal to it: more replays would decide.
    undecided: tuple[TrialRow, ...] = ()
    broke_targets: tuple[TrialRow, ...] = ()  # speculative configs that completed but broke a latency target

    @property
    def meets_slos(self) -> bool:
        return self.winner is not None

    @property
    def keep_speculation_off(self) -> bool:
        return self.winner is not None and self.winner.config is None

    @property
    def speedup(self) -> float | None:
        """The winner's median tokens/s over the baseline's (the best's, when speculation stays off)."""
        shown = self.best if self.keep_speculation_off else self.winner
        if shown is None or not self.baseline.tokens_per_s:
            return None
        return shown.tokens_per_s / self.baseline.tokens_per_s

    @property
    def tpot_change(self) -> float | None:
        """Relative change of median TPOT against the baseline (-0.2 = 20 % less); None where
        either figure is marked untrusted (a coalesced stream)."""
        shown = self.best if self.keep_speculation_off or self.winner is None else self.winner
        if shown is None or not shown.tpot_p50_s or not self.baseline.tpot_p50_s:
            return None
        if not (latency_trusted(shown.marks) and latency_trusted(self.baseline.marks)):
            return None
        return shown.tpot_p50_s / self.baseline.tpot_p50_s - 1.0

    @property
    def verdict(self) -> str:
        if self.winner is None:
            targets = ", ".join(slo.text for slo in self.slos)
            closest = ""
            if self.closest is not None:
                over = ", ".join(f"{slo.metric} {self.closest.latency(slo.metric) * 1000:.1f} ms"
                                 for slo in self.slos if self.closest.latency(slo.metric) is not None
                                 and not slo.met(self.closest))
                closest = f"; the closest is {self.closest.label}" + (f" ({over})" if over else "")
            return f"no configuration meets {targets}{closest}"
        if self.best is None:
            return "keep speculation off: " + self._why_no_speculative
        if self.keep_speculation_off:
            why = ("slower than without speculation" if self.speedup is not None and self.speedup < 1
                   else f"within the noise ({self.noise:.0%} plus the runs' spread)")
            return (f"keep speculation off: the best, {self.best.label}, gives {self.speedup:.2f}x the "
                    f"baseline's tokens/s, {why}")
        line = f"{self.winner.label}: {self.speedup:.2f}x the baseline's output tokens/s"
        if self.undecided:
            line += f"; {self.undecided_text}"
        return line

    @property
    def _why_no_speculative(self) -> str:
        """Why no speculative config is eligible here: none completed, or each broke a rule."""
        changed = [r for r in self.output_changed if r.config is not None]
        if not self.broke_targets and not changed:
            return "no speculative configuration completed"
        parts = []
        if self.broke_targets:
            targets = ", ".join(slo.text for slo in self.slos)
            closest = min(self.broke_targets, key=lambda t: worst_violation(t, self.slos))
            parts.append(f"{len(self.broke_targets)} broke {targets} (the closest, {closest.label})")
        if changed:
            parts.append(f"{len(changed)} changed greedy output")
        n = len(self.broke_targets) + len(changed)
        return f"of the {n} speculative configuration{'s' if n > 1 else ''} that completed, " + " and ".join(parts)

    @property
    def undecided_text(self) -> str:
        return undecided_text(self.winner.label, [r.label for r in self.undecided], "at this load")


def undecided_text(winner: str, others: Sequence[str], where: str) -> str:
    """What the answer says of contenders neither separated from its winner nor shown equal."""
    return (f"undecided between {winner} and {' or '.join(others)} {where} (neither separated nor shown "
            f"equal within the noise: more replays decide, --max-repeats, and a second start of each "
            f"where --trials leaves room)")


def eligible(t: TrialRow, slos: Sequence[Slo], max_output_change: float | None) -> bool:
    """Meets every latency target and kept greedy output (``max_output_change`` None: any change
    is allowed, ``--allow-output-change``)."""
    return feasible(t, slos) and (max_output_change is None
                                  or not output_changed(t.greedy_change_rate, max_output_change))


def choose(trials: Sequence[TrialRow], noise: float = DEFAULT_NOISE, slos: Sequence[Slo] = (),
           max_output_change: float | None = 0.0, tie_noise: float = DEFAULT_RUN_NOISE) -> Answer:
    """The answer for one study's trials at one load.

    Configs that break a latency target, or changed greedy output on more than
    ``max_output_change`` of the requests, are out. The rest are ranked on a conservative score
    (median tokens/s minus its scaled MAD). Speculation must beat the baseline by more than
    ``noise`` (plus both spreads): the baseline wins when it is tied with the top one at that
    margin. Otherwise the speculative configs not separated from the top one by the run-to-run
    noise (``tie_noise``, or ``noise`` where smaller, plus both spreads) are its contenders:
    those shown equal to it within that tolerance (``stats.shown_equal``: two replays or more of
    each) are tied, and the tied one with the smallest k wins; the others are undecided (the top
    one wins, and the answer says it is undecided between them). (Why the ties use the run
    noise, not ``noise``: docs/lab/notes-from-code.md.)
    """
    done = pooled([t for t in trials if t.status == "complete" and t.tokens_per_s is not None
                   and t.kind == "study"])
    baselines = [t for t in done if t.config is None]
    if not baselines:
        name = trials[0].study_name if trials else "this study"
        raise TunerError(f"{name} has no completed baseline, so no speedup can be computed; "
                         "rerun the study to measure it")
    baseline = baselines[-1]
    if baseline.tokens_per_s <= 0:
        raise TunerError(f"{baseline.study_name}: the baseline generated no output tokens at {baseline.load} "
                         "(0 tokens/s), so no speedup can be computed; check that the workload's requests "
                         "generate tokens (max_tokens) and rerun the study")
    everything = [baseline] + [t for t in done if t.config is not None]
    changed = tuple(t for t in everything if feasible(t, slos) and not eligible(t, slos, max_output_change))
    broke = tuple(t for t in everything if t.config is not None and not feasible(t, slos))
    ranked = [t for t in everything if eligible(t, slos, max_output_change)]
    spec = [t for t in ranked if t.config is not None]
    best = max(spec, key=lambda t: trial_stats(t).score) if spec else None
    found = functools.partial(Answer, baseline.study_name, baseline.model, baseline.workload_type, baseline.load,
                              baseline, best, noise=noise, slos=tuple(slos), output_changed=changed,
                              broke_targets=broke)
    if not ranked:
        closest = min(everything, key=lambda t: worst_violation(t, slos)) if slos else None
        return found(winner=None, closest=closest)
    top = max(ranked, key=lambda t: trial_stats(t).score)
    if baseline in ranked and (top is baseline or tied(trial_stats(baseline), trial_stats(top), noise)):
        return found(winner=baseline)
    tolerance = min(noise, tie_noise)
    candidates = [t for t in spec if tied(trial_stats(t), trial_stats(top), tolerance)]
    equal = [t for t in candidates if t is top or shown_equal(trial_stats(t), trial_stats(top), tolerance)]
    winner = min(equal, key=lambda t: (trial_k(t), -trial_stats(t).score))
    return found(winner=winner, undecided=tuple(t for t in candidates if t not in equal))
