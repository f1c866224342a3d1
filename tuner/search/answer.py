"""Naming the winner of a study: the fastest configuration, if it beats the baseline by more
than the measurement noise; otherwise the answer is to keep speculation off."""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from tuner.errors import TunerError
from tuner.search.slo import Slo, feasible
from tuner.stats import RepeatStats, tied
from tuner.store import TrialRow

DEFAULT_NOISE = 0.05  # run-to-run spread seen on a shared 2-core machine; repeats will measure it


def trial_stats(t: TrialRow) -> RepeatStats:
    low, high = t.tokens_per_s_ci or (t.tokens_per_s, t.tokens_per_s)
    return RepeatStats(n=t.repeats, median=t.tokens_per_s, mad=t.tokens_per_s_mad or 0.0,
                       ci_low=low, ci_high=high)


def trial_k(t: TrialRow) -> int:
    return 0 if t.config is None else int(t.config.get("num_speculative_tokens", 0))


@dataclass(frozen=True)
class Answer:
    study_name: str
    model: str
    workload_type: str
    load: str
    baseline: TrialRow
    best: TrialRow | None  # the speculative config with the highest score, winning or not
    winner: TrialRow  # the baseline when speculation does not clearly pay
    noise: float
    slos: tuple[Slo, ...] = ()
    meets_slos: bool = True  # False: no configuration met the latency targets

    @property
    def keep_speculation_off(self) -> bool:
        return self.winner.config is None

    @property
    def speedup(self) -> float | None:
        """The winner's median tokens/s over the baseline's (the best's, when speculation stays off)."""
        shown = self.best if self.keep_speculation_off else self.winner
        if shown is None or not self.baseline.tokens_per_s:
            return None
        return shown.tokens_per_s / self.baseline.tokens_per_s

    @property
    def tpot_change(self) -> float | None:
        """Relative change of median TPOT against the baseline (-0.2 = 20 % less)."""
        shown = self.best if self.keep_speculation_off else self.winner
        if shown is None or not shown.tpot_p50_s or not self.baseline.tpot_p50_s:
            return None
        return shown.tpot_p50_s / self.baseline.tpot_p50_s - 1.0

    def serve_command(self) -> str:
        argv = ["vllm", "serve", self.model]
        if not self.keep_speculation_off:
            argv += ["--speculative-config", json.dumps(self.winner.config, sort_keys=True)]
        return shlex.join(argv + list(self.winner.server_args))

    @property
    def verdict(self) -> str:
        if not self.meets_slos:
            return ("no configuration meets the latency targets ("
                    + ", ".join(slo.text for slo in self.slos) + "); the baseline is shown")
        if self.best is None:
            return "keep speculation off: no speculative configuration completed"
        if self.keep_speculation_off:
            return (f"keep speculation off: the best, {self.best.label}, gives {self.speedup:.2f}x the "
                    f"baseline's tokens/s, within the noise ({self.noise:.0%} plus the runs' spread)")
        return f"{self.winner.label}: {self.speedup:.2f}x the baseline's output tokens/s"


def choose(trials: Sequence[TrialRow], noise: float = DEFAULT_NOISE, slos: Sequence[Slo] = ()) -> Answer:
    """The answer for one study's trials at one load.

    Configs that break a latency target are out. The rest are ranked on a conservative score
    (median tokens/s minus its scaled MAD). Every config tied with the top one (within ``noise``
    of it plus both spreads) is a candidate, and the one with the smallest k wins: the baseline
    (k = 0) when it is among them.
    """
    done = [t for t in trials if t.status == "complete" and t.tokens_per_s is not None
            and t.kind == "study"]
    baselines = [t for t in done if t.config is None]
    if not baselines:
        name = trials[0].study_name if trials else "this study"
        raise TunerError(f"{name} has no completed baseline, so no speedup can be computed; "
                         "rerun the study to measure it")
    baseline = baselines[-1]
    ranked = [t for t in [baseline] + [t for t in done if t.config is not None] if feasible(t, slos)]
    spec = [t for t in ranked if t.config is not None]
    best = max(spec, key=lambda t: trial_stats(t).score) if spec else None
    if not ranked:
        return Answer(baseline.study_name, baseline.model, baseline.workload_type, baseline.load,
                      baseline, None, baseline, noise, tuple(slos), meets_slos=False)
    top = max(ranked, key=lambda t: trial_stats(t).score)
    candidates = [t for t in ranked if tied(trial_stats(t), trial_stats(top), noise)]
    winner = min(candidates, key=lambda t: (trial_k(t), -trial_stats(t).score))
    return Answer(baseline.study_name, baseline.model, baseline.workload_type, baseline.load,
                  baseline, best, winner, noise, tuple(slos))


def answers_per_study(trials: Sequence[TrialRow], noise: float = DEFAULT_NOISE) -> list[Answer]:
    """The answer of each (study, load) that has a completed baseline."""
    by_study: dict[tuple[str, str], list[TrialRow]] = {}
    for t in trials:
        by_study.setdefault((t.study_name, t.load), []).append(t)
    answers = []
    for study_trials in by_study.values():
        try:
            answers.append(choose(study_trials, noise))
        except TunerError:
            continue
    return answers


def best_answers(answers: Sequence[Answer]) -> list[Answer]:
    """Per (model, workload type), the answer with the highest speedup over its own baseline."""
    best: dict[tuple[str, str], Answer] = {}
    for answer in answers:
        key = (answer.model, answer.workload_type)
        if key not in best or (answer.speedup or 0) > (best[key].speedup or 0):
            best[key] = answer
    return [best[k] for k in sorted(best)]


def best_per_model_workload(trials: Sequence[TrialRow], noise: float = DEFAULT_NOISE) -> list[Answer]:
    """Per (model, workload type), the study (and load) whose answer has the highest speedup over
    its own baseline."""
    return best_answers(answers_per_study(trials, noise))
