"""A k for every load: vLLM's ``num_speculative_tokens_per_batch_size`` from figures measured at
several concurrencies (``--concurrency 1,4,16,64``).

One server holds one drafter, so the k-by-batch-size schedule is for one drafter (method + draft +
fields): the one that gains most over the baseline summed over the load levels (log tokens/s, so every level
counts alike). At each level its k is chosen by the study's own rule (``answer.choose``: fastest
feasible, ties to the smaller k, k = 0 where speculation does not clearly pay). A closed loop of
C clients keeps the batch at about C, so level i covers batch sizes from the geometric midpoint
with the level below to the one with the level above.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tuner.replay import LoadSpec
from tuner.decide.answer import DEFAULT_NOISE, choose, eligible, pooled, trial_k, trial_stats
from tuner.decide.slo import Slo
from tuner.decide.stats import DEFAULT_RUN_NOISE
from tuner.decide.stats import RepeatStats, geometric_mean, shown_equal, tied
from tuner.store import TrialRow

PER_BATCH_SIZE = "num_speculative_tokens_per_batch_size"


def drafter_config(config: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in config.items() if k not in ("num_speculative_tokens", PER_BATCH_SIZE)}


def _key(config: dict[str, Any]) -> str:
    return repr(sorted(drafter_config(config).items()))


@dataclass(frozen=True)
class Level:
    load: str
    concurrency: int
    k: int
    chosen: TrialRow  # the baseline's row where k = 0
    baseline: TrialRow


@dataclass(frozen=True)
class KByBatchSize:
    drafter: dict[str, Any]
    levels: tuple[Level, ...]
    ranges: tuple[tuple[int, int, int], ...]  # (first batch size, last batch size, k), inclusive

    @property
    def max_k(self) -> int:
        return max(level.k for level in self.levels)

    @property
    def needs_own_server(self) -> bool:
        """Whether the schedule differs from every single config: with one k at every batch
        size it is the config of that k, already measured, and a start of its own would repeat it
        (on the H200 the ten-minute study spent its last 100 s so)."""
        return self.config() is not None and len(self.ranges) > 1

    def config(self) -> dict[str, Any] | None:
        """The speculative config to deploy; None when speculation loses at every level."""
        if self.max_k == 0:
            return None
        return {**self.drafter, "num_speculative_tokens": self.max_k,
                PER_BATCH_SIZE: [list(r) for r in self.ranges]}

    def to_dict(self) -> dict[str, Any]:
        return {"config": self.config(), "drafter": self.drafter,
                "levels": [{"load": lv.load, "concurrency": lv.concurrency, "k": lv.k,
                            "tokens_per_s": lv.chosen.tokens_per_s,
                            "baseline_tokens_per_s": lv.baseline.tokens_per_s} for lv in self.levels]}


def batch_ranges(concurrencies: Sequence[int], ks: Sequence[int]) -> tuple[tuple[int, int, int], ...]:
    """Ranges of batch sizes per level, split at geometric midpoints, equal neighbours merged.
    The last range ends at the highest level; vLLM carries its k on to larger batches."""
    ranges: list[list[int]] = []
    start = 1
    for i, (c, k) in enumerate(zip(concurrencies, ks)):
        end = c if i == len(concurrencies) - 1 else max(c, math.floor(math.sqrt(c * concurrencies[i + 1])))
        if ranges and ranges[-1][2] == k:
            ranges[-1][1] = end
        else:
            ranges.append([start, end, k])
        start = end + 1
    return tuple(tuple(r) for r in ranges)


def tune_k_by_batch_size(rows: Sequence[TrialRow], loads: Sequence[LoadSpec],
                         noise: float = DEFAULT_NOISE, slos: Sequence[Slo] = (),
                         max_output_change: float | None = 0.0) -> KByBatchSize | None:
    """The k-by-batch-size schedule from one study's rows; None unless there are two or more
    concurrency levels and a baseline and some speculative config measured at each."""
    if len(loads) < 2 or any(load.mode != "concurrency" for load in loads):
        return None
    ordered = sorted(loads, key=lambda load: load.concurrency)
    done = pooled([r for r in rows if r.status == "complete" and r.tokens_per_s and r.kind == "study"])
    at = {load.label: [r for r in done if r.load == load.label] for load in ordered}
    baselines = {label: next((r for r in reversed(rs) if r.config is None), None) for label, rs in at.items()}
    if any(b is None for b in baselines.values()):
        return None
    drafters: dict[str, dict[str, Any]] = {_key(r.config): drafter_config(r.config)
                                           for r in done if r.config is not None}

    def answers(key: str) -> list:
        return [choose([r for r in at[load.label] if r.config is None or _key(r.config) == key],
                       noise, slos, max_output_change) for load in ordered]

    # A drafter whose k (or k = 0) meets the targets at every level, else its schedule would
    # break them somewhere: with the baseline's k = 0 where no k of it is eligible.
    drafters = {key: config for key, config in drafters.items() if all(a.winner for a in answers(key))}
    if not drafters:
        return None

    def gain(key: str) -> float:
        total = 0.0
        for label, level_rows in at.items():
            base = trial_stats(baselines[label]).score
            scores = [trial_stats(r).score for r in level_rows
                      if r.config is not None and _key(r.config) == key
                      and eligible(r, slos, max_output_change)]
            total += math.log(max([base, *scores]) / base) if base > 0 else 0.0
        return total

    best_key = max(drafters, key=gain)
    levels = [Level(load.label, load.concurrency, trial_k(answer.winner), answer.winner, answer.baseline)
              for load, answer in zip(ordered, answers(best_key))]
    ranges = batch_ranges([lv.concurrency for lv in levels], [lv.k for lv in levels])
    return KByBatchSize(drafters[best_key], tuple(levels), ranges)


@dataclass(frozen=True)
class Single:
    """The one config for every load, decided as ``answer.choose`` decides at one load."""

    rows: list[TrialRow]  # in load order
    undecided: tuple[list[TrialRow], ...] = ()  # neither separated from it nor shown equal, over the loads


def single_stats(rows: Sequence[TrialRow]) -> RepeatStats:
    """One config's figure over the loads: the geometric mean of its medians, with the spread of
    that mean (each load's relative MAD, added as independent errors, over the loads); n, the
    fewest replays of any load."""
    mean = geometric_mean([r.tokens_per_s for r in rows])
    spread = math.hypot(*[(r.tokens_per_s_mad or 0.0) / r.tokens_per_s for r in rows]) / len(rows)
    return RepeatStats(n=min(r.repeats for r in rows), median=mean, mad=mean * spread, ci_low=mean, ci_high=mean)


def at_every_load(rows: Sequence[TrialRow], labels: Sequence[str],
                  keep: Callable[[TrialRow], bool] = lambda r: True) -> list[list[TrialRow]]:
    """The study configs with a completed figure at every load (pooled over their starts), each
    as its rows in load order; ``keep``: which rows count."""
    by_config: dict[int, dict[str, TrialRow]] = {}
    for r in pooled(rows):
        if r.status == "complete" and r.tokens_per_s and r.kind == "study" and keep(r):
            by_config.setdefault(r.optuna_trial_number, {})[r.load] = r
    return [[c[label] for label in labels] for c in by_config.values() if all(label in c for label in labels)]


def single_answer(rows: Sequence[TrialRow], loads: Sequence[LoadSpec] | Sequence[str], slos: Sequence[Slo] = (),
                  max_output_change: float | None = 0.0, noise: float = DEFAULT_NOISE) -> Single | None:
    """The one config (the same at every load), eligible at each (``answer.eligible``): the
    highest geometric mean of its score over the loads, and among the speculative configs not
    separated from it (``single_stats``, the run noise or ``noise`` where smaller), those shown
    equal go to the smallest k and the rest leave it undecided, as at one load. None if no config
    was measured at every load."""
    labels = [load if isinstance(load, str) else load.label for load in loads]
    complete = at_every_load(rows, labels, lambda r: eligible(r, slos, max_output_change))
    if not complete:
        return None

    def score(c: list[TrialRow]) -> float:
        return math.fsum(math.log(max(trial_stats(r).score, 1e-9)) for r in c)

    top = max(complete, key=score)
    if top[0].config is None:
        return Single(top)
    tolerance = min(noise, DEFAULT_RUN_NOISE)
    candidates = [c for c in complete if c[0].config is not None
                  and tied(single_stats(c), single_stats(top), tolerance)]
    equal = [c for c in candidates if c is top or shown_equal(single_stats(c), single_stats(top), tolerance)]
    winner = min(equal, key=lambda c: (trial_k(c[0]), -score(c)))
    return Single(winner, tuple(c for c in candidates if all(c is not e for e in equal)))


def best_single(rows: Sequence[TrialRow], loads: Sequence[LoadSpec] | Sequence[str], slos: Sequence[Slo] = (),
                max_output_change: float | None = 0.0, noise: float = DEFAULT_NOISE) -> list[TrialRow] | None:
    """``single_answer``'s config: its rows in load order."""
    found = single_answer(rows, loads, slos, max_output_change, noise)
    return found.rows if found else None


def k_by_batch_size_beats_single(k_by_batch_size_rows: Sequence[TrialRow] | None,
                                 single: Sequence[TrialRow] | None, noise: float = DEFAULT_NOISE) -> bool | None:
    """Whether the k-by-batch-size schedule, measured, was faster than the best single config
    beyond the noise: its geometric mean over the levels above the single config's and not tied
    with it (``stats.tied``, the run noise or ``noise`` where smaller, plus both spreads: the
    rule configs are compared by everywhere, ``answer.choose``). A tie keeps the single config,
    the simpler one to deploy. None when either lacks a measurement at some level. A k by batch
    size can measure slower than the same k without one, so this is not a given
    (docs/lab/notes-from-code.md#tunerdecidek_by_batch_size)."""
    ours = {r.load: r for r in k_by_batch_size_rows or [] if r.tokens_per_s}
    theirs = {r.load: r for r in single or [] if r.tokens_per_s}
    if not theirs or not ours or ours.keys() != theirs.keys():
        return None
    a, b = single_stats(list(ours.values())), single_stats([theirs[load] for load in ours])
    return a.median > b.median and not tied(a, b, min(noise, DEFAULT_RUN_NOISE))
