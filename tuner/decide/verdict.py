"""The one verdict of a study: what to deploy, decided under the rules the study stored.

Every place that names a winner asks this module: `tuner optimize` and `tuner best` (text and
``--json``), the dashboard, a nightly job's outcome and the drift reference. The rules are the
study's own (its latest run's): latency targets, the allowed share of changed greedy output,
the k-by-batch-size schedule it measured and the server arguments marked ``--deploy-arg``.

- One load: the answer at that load (``answer.choose``).
- Several loads: the k-by-batch-size schedule where its own measurement beat the best single
  config, else the best single config (the same at every load), unless that is within the noise
  of the baseline (geometric mean over the loads); never a config that breaks a target or
  changed greedy output at some load.
- No config meets the targets: no winner and no line, but the closest config.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from tuner.engine.deploy import production_args, serve_command
from tuner.errors import TunerError
from tuner.decide.adaptive import adaptive_notes
from tuner.decide.by_context import context_note
from tuner.decide.answer import DEFAULT_NOISE, Answer, choose, eligible, undecided_text
from tuner.decide.output_check import divergence_text
from tuner.decide.k_by_batch_size import at_every_load, k_by_batch_size_beats_single, single_answer, single_stats
from tuner.decide.slo import Slo, parse_slos, worst_violation
from tuner.decide.stats import geometric_mean, tied
from tuner.store import NOT_MEASURED, TrialRow
from tuner.decide.marks import CLIENT_BOUND, LATENCY_MARKS

CONFIG, K_BY_BATCH_SIZE, OFF, NONE = "config", "k_by_batch_size", "off", "none"


@dataclass(frozen=True)
class StudyRules:
    """What a study's verdict must honour, as its latest run stored it."""

    slos: tuple[Slo, ...] = ()
    max_output_change: float | None = 0.0  # None: --allow-output-change
    server_args: tuple[str, ...] = ()
    deploy_args: tuple[str, ...] = ()
    k_by_batch_size: dict[str, Any] | None = None  # the stored k-by-batch-size schedule record
    synthetic_acceptance: str | None = None  # the rates drafts were accepted at, whatever the target said
    noise: float | None = None  # the study's --noise; None: stored before it was (the caller's default)

    @classmethod
    def from_stored(cls, stored: dict[str, Any] | None) -> StudyRules:
        if not stored:
            return cls()
        allowed = None if stored.get("allow_output_change") else (stored.get("max_output_change") or 0.0)
        return cls(parse_slos(stored.get("slos") or []), allowed, tuple(stored.get("server_args") or ()),
                   tuple(stored.get("deploy_args") or ()), stored.get("k_by_batch_size"),
                   stored.get("synthetic_acceptance"), stored.get("noise"))


@dataclass(frozen=True)
class Verdict:
    study_name: str
    model: str
    workload_type: str
    load: str  # every load of the study, as one label
    answers: dict[str, Answer]  # load -> the answer there
    kind: str  # config, k_by_batch_size, off (keep speculation off), none (no config meets the targets)
    deployed: dict[str, Any] | None  # the --speculative-config to deploy; None for off and none
    label: str  # what is deployed, or the closest config for none
    speedup: float | None  # the deployed config's (off: the best speculative's) tokens/s over the baseline's
    headline: str
    args: tuple[str, ...]  # the production server arguments of the line
    rows: tuple[TrialRow, ...]  # the deployed config's figures per load (off: the best speculative's)
    notes: tuple[str, ...] = ()  # what the user should know: changed output, marked figures
    # A what-if study (--synthetic-acceptance): the rates its drafts were accepted at. Its figures
    # are the host's step costs at that profile, not what a draft reaches: never deployed.
    what_if: str | None = None

    @property
    def deployable(self) -> bool:
        """Whether there is a line to deploy: a configuration met the targets in a real study."""
        return self.kind != NONE and self.what_if is None

    @property
    def keep_speculation_off(self) -> bool:
        return self.kind == OFF

    @property
    def recommended(self) -> str:
        """What the user is told to run, in a few words."""
        if self.kind == NONE:
            return "no configuration meets the targets"
        shown = "speculation off" if self.keep_speculation_off else self.label
        return f"what-if only: {shown}" if self.what_if else shown

    @property
    def effective_speedup(self) -> float:
        """Of what is recommended: 1.0 when speculation stays off, 0 when nothing is."""
        if self.kind == NONE:
            return 0.0
        return 1.0 if self.kind == OFF else (self.speedup or 1.0)

    def serve_command(self) -> str | None:
        """The `vllm serve` line to paste; None when no configuration meets the targets."""
        return serve_command(self.model, self.deployed, self.args) if self.deployable else None

    def config_json(self) -> str | None:
        return (json.dumps(self.deployed, indent=2, sort_keys=True) + "\n"
                if self.deployed and self.deployable else None)


def _geomean_speedup(rows: Sequence[TrialRow], answers: dict[str, Answer]) -> float | None:
    ratios = [r.tokens_per_s / answers[r.load].baseline.tokens_per_s for r in rows
              if r.tokens_per_s and answers[r.load].baseline.tokens_per_s]
    return geometric_mean(ratios) if ratios else None


def _notes(answers: dict[str, Answer], shown: Sequence[TrialRow], rules: StudyRules) -> tuple[str, ...]:
    notes = []
    for answer in answers.values():
        for r in answer.output_changed:
            notes.append(f"{r.label} was not chosen at {r.load}: its greedy output differed from the "
                         f"baseline's on {r.greedy_change_rate:.0%} of requests beyond numeric near-ties"
                         f"{divergence_text(r.first_divergence, r.greedy_near_tie_rate)}; "
                         "--allow-output-change to allow it")
    for r in shown:
        if r.greedy_near_tie_rate and not r.greedy_change_rate:
            notes.append(f"{r.label} differed from the baseline at {r.load} only at numeric near-ties "
                         f"(the baseline's top two candidates close in log-probability, --near-tie-margin) "
                         f"on {r.greedy_near_tie_rate:.0%} of requests{divergence_text(r.first_divergence)}; "
                         "not counted as a change")
        elif rules.max_output_change is None and r.greedy_match_rate is not None and r.greedy_match_rate < 1:
            # Under synthetic acceptance the output check does not apply: say why, not a flag
            # the user never gave.
            why = (f"not compared: acceptance was synthetic ({rules.synthetic_acceptance}), so vLLM "
                   "accepted drafts at those rates whatever the target said"
                   if rules.synthetic_acceptance else "allowed by --allow-output-change")
            notes.append(f"{r.label} changed greedy output at {r.load} on {1 - r.greedy_match_rate:.0%} "
                         f"of requests{divergence_text(r.first_divergence)} ({why})")
    for r in shown:
        baseline = answers[r.load].baseline if r.load in answers else None
        if r.config is not None and (falls := context_note(r, baseline, next(iter(answers.values())).noise)):
            notes.append(falls)
    if busy := client_bound_note([*(a.baseline for a in answers.values()), *shown]):
        notes.insert(0, busy)
    for r in [*shown, *(a.baseline for a in answers.values())]:
        if r.marks:
            what = "; its latency figures are not compared" if any(m in LATENCY_MARKS for m in r.marks) else ""
            notes.append(f"figures of {r.label} at {r.load} are marked: {', '.join(r.marks)}{what}")
    return tuple(dict.fromkeys(notes))


def client_bound_note(rows: Sequence[TrialRow]) -> str | None:
    """One sentence when the tuner's own client, not the server, set the pace of a replay that
    was already replayed once more for it (tuner.decide.marks.CLIENT_BOUND)."""
    bound = list({(r.label, r.load): r for r in rows if CLIENT_BOUND in r.marks}.values())
    if not bound:
        return None
    first = bound[0]
    seen = (f" (client TTFT p50 {first.ttft_p50_s * 1000:.0f} ms against the server's own mean "
            f"{first.server_ttft_mean_s * 1000:.0f} ms)" if first.ttft_p50_s and first.server_ttft_mean_s else "")
    where = ", ".join(f"{r.label} at {r.load}" for r in bound)
    return (f"the host was too busy for the tuner's client: {where} still lagged the server when replayed "
            f"once more{seen}, so those tokens/s are the client's pace, not the server's, and their "
            f"latencies are not compared; run the study again with the host otherwise idle, or give the "
            f"tuner a core of its own (e.g. taskset -c 1 tuner optimize ...)")


def _not_measured(rows: Sequence[TrialRow]) -> list[TrialRow]:
    """Configs whose trial met a fault of the host and that no later trial measured."""
    done = {json.dumps(r.config, sort_keys=True) for r in rows if r.status == "complete"}
    missing = {json.dumps(r.config, sort_keys=True): r for r in rows if r.status == NOT_MEASURED}
    return [r for key, r in missing.items() if key not in done]


def measured_loads(rows: Sequence[TrialRow]) -> list[str]:
    """The study's load levels, in order. A trial over several loads that has no figures (it
    failed or was interrupted) is stored under the combined label ('concurrency 1,8,32'),
    which is not a level of its own."""
    with_figures = [r.load for r in rows if r.tokens_per_s is not None]
    return list(dict.fromkeys(with_figures or [r.load for r in rows]))


def study_verdict(rows: Sequence[TrialRow], rules: StudyRules = StudyRules(),
                  noise: float = DEFAULT_NOISE) -> Verdict:
    """The verdict of one study from all its rows. Raises TunerError without a completed
    baseline at some load. ``noise``: for a study that stored no --noise of its own."""
    v = _study_verdict(rows, rules, noise)
    return replace(v, headline=f"what-if (synthetic acceptance {v.what_if}): {v.headline}") if v.what_if else v


def _study_verdict(rows: Sequence[TrialRow], rules: StudyRules, noise: float) -> Verdict:
    if rules.noise is not None:
        noise = rules.noise
    study_rows = [r for r in rows if r.kind == "study"]
    if not study_rows:
        raise TunerError("the study has no trials")
    first = study_rows[0]
    loads = measured_loads(study_rows)
    unmeasured = _not_measured(study_rows)
    if (base := next((r for r in unmeasured if r.config is None), None)) is not None:
        raise TunerError(f"{first.study_name}: the baseline was not measured, for a fault of the host "
                         f"rather than a config ({base.failure_cause}); run the same command again "
                         "to measure it")
    answers = {load: choose([r for r in study_rows if r.load == load], noise, rules.slos,
                            rules.max_output_change) for load in loads}
    args = tuple(production_args(rules.server_args or first.server_args, rules.deploy_args))
    label_all = ",".join(loads) if len(loads) > 1 else loads[0]

    def verdict(kind: str, deployed, label: str, shown: Sequence[TrialRow], headline: str) -> Verdict:
        return _what_if(Verdict(first.study_name, first.model, first.workload_type, label_all, answers, kind,
                       deployed, label, _geomean_speedup(shown, answers), headline, args, tuple(shown),
                       _notes(answers, shown, rules) + tuple(adaptive_notes(study_rows)) + tuple(
                           f"{r.label} was not measured, for a fault of the host ({r.failure_cause}); "
                           "run the same command again to measure it" for r in unmeasured)), rules)

    unmet = [a for a in answers.values() if a.winner is None]
    if unmet:
        a = unmet[0]
        at = f" at {a.load}" if len(loads) > 1 else ""
        return verdict(NONE, None, a.closest.label if a.closest else "", [], a.verdict + at)
    if len(loads) == 1:
        (a,) = answers.values()
        if a.keep_speculation_off:
            return verdict(OFF, None, "speculation off", [a.best] if a.best else [], a.verdict)
        return verdict(CONFIG, a.winner.config, a.winner.label, [a.winner], a.verdict)
    return _over_loads(rows, study_rows, answers, loads, label_all, rules, noise, verdict)


WHAT_IF_NOTE = ("a what-if study: acceptance was synthetic ({rates}), so its figures are this host's step "
                "costs at that profile, not what the draft itself would reach; nothing from it is deployed: "
                "measure again without --synthetic-acceptance before deploying")


def _what_if(v: Verdict, rules: StudyRules) -> Verdict:
    """A study run with --synthetic-acceptance is a what-if wherever it is shown: marked in its
    headline and notes, with no deploy line (``Verdict.deployable``)."""
    if not rules.synthetic_acceptance:
        return v
    return replace(v, what_if=rules.synthetic_acceptance, notes=(WHAT_IF_NOTE.format(rates=rules.synthetic_acceptance), *v.notes))


def _schedule_rows(rows: Sequence[TrialRow], loads: Sequence[str]) -> list[TrialRow] | None:
    """The k-by-batch-size schedule's own measurement, a row per load (its latest), or None
    unless it completed at every load."""
    measured = {r.load: r for r in rows if r.kind == "k_by_batch_size" and r.status == "complete" and r.tokens_per_s}
    return [measured[load] for load in loads] if all(load in measured for load in loads) else None


def _closest_over_loads(rows: Sequence[TrialRow], loads: Sequence[str], slos: Sequence[Slo]) -> TrialRow | None:
    """Of the configs measured at every load, the one whose worst latency target is broken least
    at its worst load (its row there)."""
    complete = at_every_load(rows, loads)
    if not complete or not slos:
        return None
    worst = [max(c, key=lambda r: worst_violation(r, slos)) for c in complete]
    return min(worst, key=lambda r: worst_violation(r, slos))


def _over_loads(rows, study_rows, answers, loads, label_all, rules, noise, verdict) -> Verdict:
    """Several loads: one config, or the k-by-batch-size schedule, that meets the rules at every
    load; the schedule only where its own server's measurement beat the best single config
    beyond the noise, or where no single config meets the targets at every load."""
    record = rules.k_by_batch_size or {}
    measured = _schedule_rows(rows, loads)
    # The schedule's own server must meet the study's rules at every load as a single config
    # must: its latency targets and its greedy output (checked like any trial's), not speed alone.
    schedule_eligible = measured is not None and all(eligible(r, rules.slos, rules.max_output_change)
                                                     for r in measured)
    found = single_answer(study_rows, loads, rules.slos, rules.max_output_change, noise)
    single = found.rows if found else None
    beats = k_by_batch_size_beats_single(measured, single, noise) if single else None

    def deploy_schedule(why: str) -> Verdict:
        # The config its own server ran: a helper worker's later run stores no record of it.
        v = verdict(K_BY_BATCH_SIZE, measured[-1].config, measured[-1].label, measured, "")
        return replace(v, headline=f"{v.label}: {v.speedup or 0:.2f}x the baseline's output tokens/s "
                                   f"(geometric mean over {label_all}), {why}")

    if schedule_eligible:
        if single is None:
            return deploy_schedule("the only configuration measured that meets the targets at every load")
        if beats:
            return deploy_schedule("faster than the best single config beyond the noise")
    if single is None:
        closest = _closest_over_loads(study_rows, loads, rules.slos)
        why = ""
        if record.get("config") and measured is None:
            why = ("; the k-by-batch-size schedule, which might, was not measured on its own server "
                   "(see the trials table); run the same command again to measure it")
        elif measured is not None:
            why = "; the k-by-batch-size schedule, measured on its own server, broke a target too"
        at_worst = ""
        if closest is not None:
            over = ", ".join(f"{slo.metric} {closest.latency(slo.metric) * 1000:.1f} ms"
                             for slo in rules.slos if closest.latency(slo.metric) is not None and not slo.met(closest))
            at_worst = f"; the closest is {closest.label} ({over or 'changed greedy output'} at {closest.load})"
        targets = ", ".join(slo.text for slo in rules.slos) or "the study's rules"
        return verdict(NONE, None, closest.label if closest else "", [],
                       f"no single configuration meets {targets} at every load of {label_all}{at_worst}{why}")
    bases = [answers[load].baseline for load in loads]
    baseline_ok = all(eligible(b, rules.slos, rules.max_output_change) for b in bases)
    if single[0].config is None:
        best = [r for r in single if r.config is not None]
        return verdict(OFF, None, "speculation off", best, "keep speculation off: the baseline is the "
                       f"fastest single config over {label_all}")
    v = verdict(CONFIG, single[0].config, single[0].label, single, "")
    # The same rule as at one load (answer.choose): speculation must beat the baseline by more
    # than the noise plus both spreads, else it stays off, where the baseline meets the rules.
    if baseline_ok and tied(single_stats(single), single_stats(bases), noise):
        return replace(v, kind=OFF, deployed=None, label="speculation off",
                       headline=f"keep speculation off: the best single config, {v.label}, gives "
                                f"{v.speedup or 0:.2f}x the baseline's tokens/s over {label_all}, "
                                f"within the noise ({noise:.0%} plus the runs' spread)")
    why = ""
    if not baseline_ok:
        broken = next(b for b in bases if not eligible(b, rules.slos, rules.max_output_change))
        why = f"; without speculation the baseline breaks a target at {broken.load}"
    if schedule_eligible and beats is False:
        why += "; the k-by-batch-size schedule was not faster beyond the noise"
    elif measured is not None and not schedule_eligible:
        why += "; the k-by-batch-size schedule broke a latency target or changed greedy output"
    if found.undecided:
        why += "; " + undecided_text(v.label, [rows[0].label for rows in found.undecided], f"over {label_all}")
    return replace(v, headline=f"{v.label}: {v.speedup or 0:.2f}x the baseline's output tokens/s "
                               f"(geometric mean over {label_all}){why}")


def verdicts(trials: Sequence[TrialRow], rules: dict[str, dict[str, Any]],
             noise: float = DEFAULT_NOISE) -> list[Verdict]:
    """Each study's verdict, for the studies with a completed baseline at every load;
    ``rules``: study name -> what its latest run stored (``ResultStore.study_rules``)."""
    by_study: dict[str, list[TrialRow]] = {}
    for t in trials:
        by_study.setdefault(t.study_name, []).append(t)
    found = []
    for name, study_rows in by_study.items():
        try:
            found.append(study_verdict(study_rows, StudyRules.from_stored(rules.get(name)), noise))
        except TunerError:
            continue
    return found


def best_verdicts(found: Sequence[Verdict]) -> list[Verdict]:
    """Per (model, workload type), the study whose recommendation gains most: a real study before
    a what-if one (--synthetic-acceptance, never deployed), and one that met its targets before
    one whose targets nothing met."""
    def rank(v: Verdict) -> tuple:
        return v.what_if is None, v.kind != NONE, v.effective_speedup

    best: dict[tuple[str, str], Verdict] = {}
    for v in found:
        key = (v.model, v.workload_type)
        if key not in best or rank(v) > rank(best[key]):
            best[key] = v
    return [best[k] for k in sorted(best)]


def best_from_store(store, model: str | None = None, workload_type: str | None = None,
                    noise: float | None = None) -> list[Verdict]:
    """`tuner best`, the dashboard and the drift reference: the best study per (model, workload
    type), each under its own stored --noise; ``noise`` given overrides them all."""
    rules = store.study_rules()
    if noise is not None:
        rules = {name: {**stored, "noise": noise} for name, stored in rules.items()}
    return best_verdicts(verdicts(store.trials(model=model, workload_type=workload_type), rules,
                                  DEFAULT_NOISE if noise is None else noise))


def objective_by_trial(rows: Sequence[TrialRow]) -> dict[int, float]:
    """Trial number -> geometric mean of its tokens/s over the loads (the figure itself for one)."""
    figures: dict[int, list[float]] = {}
    for r in rows:
        if r.kind == "study" and r.status == "complete" and r.tokens_per_s:
            figures.setdefault(r.optuna_trial_number, []).append(r.tokens_per_s)
    return {n: geometric_mean(v) for n, v in figures.items()}


def prediction_error(rows: Sequence[TrialRow]) -> tuple[int, float, float] | None:
    """How far the step-cost model was off on the trials it predicted: (trials, mean absolute
    relative error, worst), against the trial's objective (the geometric mean over its loads)."""
    objective = objective_by_trial(rows)
    predicted = {r.optuna_trial_number: r.predicted_tokens_per_s for r in rows
                 if r.predicted_tokens_per_s and r.optuna_trial_number in objective}
    errors = [abs(p / objective[n] - 1) for n, p in predicted.items()]
    if not errors:
        return None
    return len(errors), sum(errors) / len(errors), max(errors)
