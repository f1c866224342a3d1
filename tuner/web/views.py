"""What each dashboard page shows, built from the store's reads and the search's answers.

The same dicts are rendered by the templates and returned by the JSON API, so the pages and
``/api/`` can not disagree.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from tuner.plan.request import summary
from tuner.errors import UsageError
from tuner.outputs.report import verdict_dict
from tuner.decide.answer import Answer, trial_k
from tuner.decide.slo import pareto_front
from tuner.decide.verdict import StudyRules, Verdict, best_verdicts, verdicts
from tuner.schedule.views import schedule_views
from tuner.store import JobStore, ResultStore, TrialRow
from tuner.web.charts import Point, Rule, Series, xy_chart

LOG_TAIL_LINES = 60


def _time(value: datetime | None) -> str | None:
    return value.isoformat(timespec="seconds") if value else None


def speedup_error(answer: Answer) -> float | None:
    """One standard error of the speedup, from both trials' scaled MADs; None without repeats."""
    shown = answer.winner if not answer.keep_speculation_off else answer.best
    base = answer.baseline
    if shown is None or answer.speedup is None or shown.repeats < 2 or base.repeats < 2:
        return None
    rel = math.hypot((shown.tokens_per_s_mad or 0) / shown.tokens_per_s,
                     (base.tokens_per_s_mad or 0) / base.tokens_per_s)
    return answer.speedup * rel


def _finished(trials: Sequence[TrialRow]) -> datetime | None:
    times = [t.finished_at for t in trials if t.finished_at]
    return max(times) if times else None


def study_verdicts(store: ResultStore, trials: Sequence[TrialRow]) -> list[tuple[Verdict, datetime | None]]:
    """Each study's verdict (under its stored rules) with when its last trial ended, oldest first."""
    found = [(v, _finished([t for t in trials if t.study_name == v.study_name]))
             for v in verdicts(trials, store.study_rules())]
    return sorted(found, key=lambda a: a[1].timestamp() if a[1] else 0.0)


def answer_view(verdict: Verdict, history: list[tuple[Verdict, datetime | None]]) -> dict[str, Any]:
    view = verdict_dict(verdict)
    view["speedup_error"] = speedup_error(next(iter(verdict.answers.values()))) if len(verdict.answers) == 1 else None
    view["winner_label"] = verdict.recommended
    view["last_tuned"] = _time(history[-1][1]) if history else None
    # Did the newest study name another winner than the one before it (a nightly re-tune)?
    if len(history) >= 2:
        newest, previous = history[-1][0], history[-2][0]
        view["changed_by_last_run"] = (newest.deployed, newest.kind) != (previous.deployed, previous.kind)
    else:
        view["changed_by_last_run"] = None
    return view


def overview(store: ResultStore) -> dict[str, Any]:
    history = study_verdicts(store, store.trials())  # every study's verdict, computed once
    cells = []
    for answer in best_verdicts([a for a, _ in history]):
        mine = [(a, when) for a, when in history
                if (a.model, a.workload_type) == (answer.model, answer.workload_type)]
        cells.append(answer_view(answer, mine))
    return {"models": sorted({c["model"] for c in cells}),
            "workload_types": sorted({c["workload_type"] for c in cells}),
            "cells": cells}


def _drafter(t: TrialRow) -> str:
    """The series a trial belongs to: its method and draft, without k."""
    if t.config is None:
        return "baseline"
    name = t.config.get("method", "?")
    if t.config.get("model"):
        name += " " + Path(str(t.config["model"])).name
    return name


def model_page(store: ResultStore, model: str, workload_type: str) -> dict[str, Any]:
    trials = store.trials(model=model, workload_type=workload_type)
    if not trials:
        raise UsageError(f"no study of model {model!r} on workload type {workload_type!r}")
    history = study_verdicts(store, trials)
    if not history:
        raise UsageError(f"no study of {model!r} on {workload_type!r} has a completed baseline yet")
    (best,) = best_verdicts([a for a, _ in history])  # as on the overview and in `tuner best`
    view = answer_view(best, history)
    first_load, first_answer = next(iter(best.answers.items()))
    study_trials = [t for t in trials if t.study_name == best.study_name and t.load == first_load]
    runs = store.study_runs(best.study_name)
    slos = StudyRules.from_stored(runs[-1]).slos if runs else ()
    view["charts"] = {
        "tokens_per_k": tokens_per_k_chart(study_trials, first_answer),
        "acceptance": acceptance_chart(study_trials),
        "pareto": pareto_chart(study_trials, slos),
        "history": history_chart(history),
    }
    view["k_by_batch_size"] = store.study_rules(best.study_name).get(best.study_name, {}).get("k_by_batch_size")
    view["schedule"] = view["k_by_batch_size"]  # deprecated alias in /api/model, removed next release
    view["history"] = [{"study": a.study_name, "load": a.load, "finished": _time(when),
                        "winner": a.recommended, "speedup": a.speedup} for a, when in history]
    view["studies"] = sorted({t.study_name for t in trials})
    return view


def tokens_per_k_chart(trials: Sequence[TrialRow], answer: Answer) -> str:
    series: dict[str, list[Point]] = {}
    for t in trials:
        if t.status != "complete" or t.config is None or t.tokens_per_s is None or t.kind != "study":
            continue
        err = t.tokens_per_s_mad if t.repeats > 1 else 0.0
        series.setdefault(_drafter(t), []).append(
            Point(trial_k(t), t.tokens_per_s, err or 0.0, f"{t.label}: {t.tokens_per_s:.1f} tok/s"))
    rules = [Rule(f"baseline {answer.baseline.tokens_per_s:.0f}", answer.baseline.tokens_per_s)]
    return xy_chart("chart-tokens-per-k", [Series(n, p) for n, p in series.items()],
                    "k (num_speculative_tokens)", "output tokens/s", rules)


def acceptance_chart(trials: Sequence[TrialRow], top: int = 4) -> str:
    """Per-position acceptance of the fastest speculative configs."""
    done = [t for t in trials if t.status == "complete" and t.per_position and t.tokens_per_s]
    done.sort(key=lambda t: t.tokens_per_s or 0, reverse=True)
    series = [Series(t.label, [Point(i + 1, p, 0.0, f"{t.label}, position {i + 1}: {p:.3f}")
                               for i, p in enumerate(t.per_position or [])]) for t in done[:top]]
    return xy_chart("chart-acceptance", series, "draft position", "acceptance rate", y_from_zero=True)


def pareto_chart(trials: Sequence[TrialRow], slos: Sequence[Any]) -> str:
    done = [t for t in trials if t.status == "complete" and t.tokens_per_s and t.tpot_p99_s
            and t.kind == "study"]
    front = {id(t) for t in pareto_front(done)}
    on = [Point(t.tokens_per_s, t.tpot_p99_s * 1000, 0.0, t.label) for t in done if id(t) in front]
    off = [Point(t.tokens_per_s, t.tpot_p99_s * 1000, 0.0, t.label) for t in done if id(t) not in front]
    rules = [Rule(slo.text, slo.limit_s * 1000) for slo in slos if slo.metric == "tpot_p99"]
    return xy_chart("chart-pareto", [Series("Pareto front", on), Series("other configs", off, line=False)],
                    "output tokens/s", "TPOT p99 (ms)", rules)


def history_chart(history: Sequence[tuple[Verdict, datetime | None]]) -> str:
    points = [Point(i + 1, a.speedup or 1.0, 0.0, f"{_time(when)}: {a.recommended}")
              for i, (a, when) in enumerate(history)]
    return xy_chart("chart-history", [Series("best speedup", points)], "study (oldest first)",
                    "speedup over baseline", [Rule("1x", 1.0)])


def studies(store: ResultStore) -> list[dict[str, Any]]:
    return [{**s, "started_at": _time(s["started_at"]), "last_run_at": _time(s["last_run_at"]),
             "finished_at": _time(s["finished_at"])} for s in store.studies()]


def trial_view(t: TrialRow) -> dict[str, Any]:
    error = None
    if t.predicted_tokens_per_s and t.tokens_per_s:
        error = t.tokens_per_s / t.predicted_tokens_per_s - 1
    return {"number": t.optuna_trial_number, "label": t.label, "status": t.status, "kind": t.kind,
            "load": t.load, "config": t.config, "failure_cause": t.failure_cause,
            "tokens_per_s": t.tokens_per_s, "tokens_per_s_mad": t.tokens_per_s_mad, "repeats": t.repeats,
            "acceptance_rate": t.acceptance_rate, "mean_acceptance_length": t.mean_acceptance_length,
            "per_position": t.per_position, "ttft_p50_s": t.ttft_p50_s, "ttft_p99_s": t.ttft_p99_s,
            "tpot_p50_s": t.tpot_p50_s, "tpot_p99_s": t.tpot_p99_s, "e2e_p99_s": t.e2e_p99_s,
            "failed_requests": t.failed_requests, "predicted_tokens_per_s": t.predicted_tokens_per_s,
            "predicted_sigma": t.predicted_sigma, "prediction_error": error,
            "proposal_reason": t.proposal_reason, "finished_at": _time(t.finished_at),
            "server_log_path": t.server_log_path, "vllm_version": t.vllm_version,
            "request_acceptance": t.request_acceptance, "acceptance_by_context": t.acceptance_by_context}


def study_page(store: ResultStore, name: str) -> dict[str, Any]:
    trials = store.trials(study_name=name)
    if not trials:
        raise UsageError(f"no study named {name!r}")
    runs = store.study_runs(name)
    return {"name": name, "model": trials[0].model, "workload_type": trials[0].workload_type,
            # "schedule": deprecated alias of "k_by_batch_size" in /api/study, removed next release
            "runs": [{**r, "started_at": _time(r["started_at"]), "schedule": r["k_by_batch_size"]}
                     for r in runs],
            "trials": [trial_view(t) for t in trials]}


def log_tail(path: str | None, lines: int = LOG_TAIL_LINES) -> str:
    if not path:
        return "(no server log was recorded for this trial)"
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError as exc:
        return f"(the server log {path} cannot be read here: {exc.strerror})"


def trial_page(store: ResultStore, study: str, number: int) -> dict[str, Any]:
    rows = [t for t in store.trials(study_name=study) if t.optuna_trial_number == number]
    if not rows:
        raise UsageError(f"study {study!r} has no trial {number}")
    first = rows[0]
    return {"study": study, "model": first.model, "workload_type": first.workload_type,
            "number": number, "label": first.label,
            "config_json": json.dumps(first.config, indent=2, sort_keys=True) if first.config else "null (baseline)",
            "loads": [trial_view(t) for t in rows], "log_tail": log_tail(first.server_log_path)}


def jobs_page(jobs: JobStore, limit: int = 100) -> dict[str, Any]:
    """`tuner serve`'s schedules, its latest jobs with their outcome, and drift events."""
    return {"schedules": schedule_views(jobs),
            "jobs": [job.to_dict() for job in jobs.jobs(limit=limit)],
            "drift": [{**d.__dict__, "detected_at": _time(d.detected_at)} for d in jobs.drift_events(limit=50)]}


def job_page(jobs: JobStore, job_id: int) -> dict[str, Any]:
    job = jobs.job(job_id)
    if job is None:
        raise UsageError(f"no job {job_id}")
    return {**job.to_dict(), "study": summary(job.request), "log_tail": log_tail(job.log_path) if job.log_path else "(not started yet)"}
