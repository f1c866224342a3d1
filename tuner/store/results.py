"""Writing measurements and reading them back; no decisions are made here."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, selectinload

from tuner.store.models import StudyRun, TargetModel, TrialMetrics, TrialRecord, TrialRun, WorkloadRecord

if TYPE_CHECKING:  # the rooms above that hand their results down to be stored
    from tuner.measure.trial import Measurement
    from tuner.workload import Workload


@dataclass(frozen=True)
class RunOrigin:
    """Where a run measured: figures from another host, GPU, vLLM or workload do not compare."""

    host: str
    gpu_name: str | None
    vllm_version: str | None
    workload_hash: str
    workload_file: str


def workload_hash(path) -> str:
    """The digest a run's workload is stored under (its file's bytes)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _now() -> datetime:
    return datetime.now(timezone.utc)


@dataclass(frozen=True)
class TrialRow:
    """A stored trial with its figures, detached from the session."""

    study_name: str
    model: str
    workload_type: str
    load: str
    optuna_trial_number: int
    config: dict[str, Any] | None
    label: str
    status: str
    failure_cause: str | None
    server_log_path: str | None
    tokens_per_s: float | None
    tpot_p50_s: float | None
    ttft_p50_s: float | None
    acceptance_rate: float | None
    mean_acceptance_length: float | None
    per_position: list[float] | None
    finished_at: datetime | None
    vllm_version: str | None
    host: str
    server_args: list[str]
    repeats: int = 1
    tokens_per_s_mad: float | None = None
    tokens_per_s_precision: float | None = None  # half the 95 % interval, relative
    tokens_per_s_ci: tuple[float, float] | None = None
    greedy_match_rate: float | None = None
    greedy_near_tie_rate: float | None = None  # differ only at a near-tie of the baseline's
    ttft_p99_s: float | None = None
    tpot_p99_s: float | None = None
    e2e_p99_s: float | None = None
    kind: str = "study"
    predicted_tokens_per_s: float | None = None
    predicted_sigma: float | None = None
    proposal_reason: str | None = None
    failed_requests: int | None = None
    first_divergence: dict[str, Any] | None = None
    marks: tuple[str, ...] = ()  # why some figures cannot be trusted (tuner.decide.marks)
    # The requests' own acceptance (total and source) and acceptance length by context length.
    request_acceptance: dict | None = None
    acceptance_by_context: list | None = None
    server_tpot_mean_s: float | None = None
    server_ttft_mean_s: float | None = None
    deploy_args: tuple[str, ...] = ()
    startup_s: float | None = None  # the server's start, process to /health
    trial_s: float | None = None  # the whole trial: start, warm-up, replays, /metrics, stop
    drafts: int | None = None  # from /metrics over the replay: draft_tokens / drafts = k applied
    draft_tokens: int | None = None
    replays: tuple[float, ...] = ()  # tokens/s of each replay at this load
    starts: int = 1  # servers its figures come from (answer.pooled: a second start of an undecided config)

    @property
    def greedy_change_rate(self) -> float | None:
        """The share of greedy requests really changed: differing from the baseline's, and not
        only at a near-tie of the baseline's (None: not compared)."""
        if self.greedy_match_rate is None:
            return None
        return max(0.0, 1 - self.greedy_match_rate - (self.greedy_near_tie_rate or 0.0))

    @property
    def start_share(self) -> float | None:
        """The part of the trial spent starting the server (on a GPU host, most of it)."""
        return self.startup_s / self.trial_s if self.startup_s and self.trial_s else None

    @property
    def k_applied(self) -> float | None:
        """Draft tokens per draft, as the server counted them (a k-by-batch-size schedule shows
        here whether the server used the k it was given at this load)."""
        return self.draft_tokens / self.drafts if self.drafts and self.draft_tokens is not None else None

    def latency(self, name: str) -> float | None:
        """``tpot_p99`` -> tpot_p99_s, in seconds."""
        return getattr(self, f"{name}_s", None)


class ResultStore:
    def __init__(self, engine: Engine):
        self.engine = engine

    def _get_or_add(self, session: Session, model_cls, where: dict, **values):
        row = session.scalars(select(model_cls).filter_by(**where)).first()
        if row is None:
            row = model_cls(**where, **values, created_at=_now())
            session.add(row)
            session.flush()
        return row

    def start_run(self, *, study_name: str, model: str, workload: Workload, space: dict,
                  load: str, server_args: list[str], host: str, gpu_name: str | None,
                  deploy_args: list[str] | None = None) -> int:
        content_hash = workload_hash(workload.path)
        with Session(self.engine) as session, session.begin():
            model_row = self._get_or_add(session, TargetModel, {"name": model})
            workload_row = self._get_or_add(
                session, WorkloadRecord, {"type": workload.type, "content_hash": content_hash},
                file_name=workload.path.name, request_count=len(workload))
            run = StudyRun(study_name=study_name, model_id=model_row.id, workload_id=workload_row.id,
                           space=space, load=load, server_args=server_args, deploy_args=deploy_args or None,
                           vllm_version=None,
                           host=host, gpu_name=gpu_name, status="running", started_at=_now())
            session.add(run)
            session.flush()
            return run.id

    def finish_run(self, run_id: int, status: str, vllm_version: str | None = None) -> None:
        with Session(self.engine) as session, session.begin():
            run = session.get(StudyRun, run_id)
            run.status, run.finished_at = status, _now()
            run.vllm_version = vllm_version or run.vllm_version

    def start_trial(self, run_id: int, number: int, config: dict | None, label: str, *,
                    kind: str = "study", predicted: tuple[float, float] | None = None,
                    reason: str | None = None) -> int:
        with Session(self.engine) as session, session.begin():
            trial = TrialRecord(study_run_id=run_id, optuna_trial_number=number, config=config,
                                label=label, kind=kind, status="running", started_at=_now(),
                                predicted_tokens_per_s=predicted[0] if predicted else None,
                                predicted_sigma=predicted[1] if predicted else None,
                                proposal_reason=reason)
            session.add(trial)
            session.flush()
            return trial.id

    def end_trial(self, trial_id: int, status: str, cause: str | None = None,
                  log_path: str | None = None) -> None:
        with Session(self.engine) as session, session.begin():
            trial = session.get(TrialRecord, trial_id)
            trial.status, trial.failure_cause, trial.finished_at = status, cause, _now()
            trial.server_log_path = log_path or trial.server_log_path

    def set_run_fields(self, run_id: int, **fields) -> None:
        """strategy, slos, pareto_front or k_by_batch_size of a study run."""
        with Session(self.engine) as session, session.begin():
            run = session.get(StudyRun, run_id)
            for name, value in fields.items():
                setattr(run, name, value)

    def complete_trial(self, trial_id: int, m: Measurement, checks: Sequence[Any] | None = None,
                       worst_check: Any | None = None, noise: float = 0.05) -> None:
        """Store every run, and the trial's figures at ``m.load``: the median run's, with the
        spread of tokens/s. A trial over several loads calls this once per load. ``checks``:
        each run's greedy-output check against the baseline (an ``OutputCheck``: ``match_rate``,
        ``near_tie_rate``, ``first_divergence``); ``worst_check``: the trial's figure from them."""
        s, a, tps = m.summary, m.acceptance, m.tokens_per_s
        median_run = m.median_run
        server = median_run.server_latency
        per_request = median_run.request_acceptance  # the requests' own acceptance, by context length
        checks = list(checks or [None] * len(m.runs))

        def pct(stats, name):
            return getattr(stats, name) if stats else None

        with Session(self.engine) as session, session.begin():
            trial = session.get(TrialRecord, trial_id)
            trial.status, trial.finished_at = "complete", _now()
            trial.server_log_path, trial.startup_s = m.server.log_path, m.server.startup_s
            trial.server_command = list(m.server.command)
            trial.replay_s, trial.vllm_version = s.duration_s, m.server.vllm_version
            session.add(TrialMetrics(
                trial_id=trial_id, load=m.load, output_tokens_per_s=tps.median,
                requests_per_s=s.requests_per_s, requests=s.requests, failed_requests=s.failed,
                output_tokens=s.output_tokens,
                ttft_p50_s=pct(s.ttft, "p50"), ttft_p90_s=pct(s.ttft, "p90"), ttft_p99_s=pct(s.ttft, "p99"),
                tpot_p50_s=pct(s.tpot, "p50"), tpot_p90_s=pct(s.tpot, "p90"), tpot_p99_s=pct(s.tpot, "p99"),
                e2e_p50_s=pct(s.e2e, "p50"), e2e_p90_s=pct(s.e2e, "p90"), e2e_p99_s=pct(s.e2e, "p99"),
                errors=list(s.errors),
                acceptance_rate=a.acceptance_rate if a else None,
                mean_acceptance_length=a.mean_acceptance_length if a else None,
                per_position_acceptance=list(a.per_position) if a else None,
                drafts=a.drafts if a else None, draft_tokens=a.draft_tokens if a else None,
                accepted_tokens=a.accepted_tokens if a else None,
                server_generation_tokens=median_run.server_generation_tokens,
                repeats=tps.n, tokens_per_s_mad=tps.mad, tokens_per_s_ci_low=tps.ci_low,
                tokens_per_s_ci_high=tps.ci_high,
                tokens_per_s_precision=m.precision if math.isfinite(m.precision) else None,
                greedy_match_rate=worst_check.match_rate if worst_check else None,
                greedy_near_tie_rate=worst_check.near_tie_rate if worst_check else None,
                first_divergence=worst_check.first_divergence if worst_check else None,
                marks=list(m.marks(noise)) or None,
                server_ttft_mean_s=server.ttft_mean_s if server else None,
                server_tpot_mean_s=server.tpot_mean_s if server else None,
                server_e2e_mean_s=server.e2e_mean_s if server else None,
                request_acceptance=per_request.total.to_dict() if per_request and per_request.total else None,
                acceptance_by_context=list(per_request.by_context) if per_request else None,
            ))
            for run, check in zip(m.runs, checks):
                rs, ra = run.summary, run.acceptance
                session.add(TrialRun(
                    trial_id=trial_id, load=m.load, repeat=run.repeat, output_tokens_per_s=rs.output_tokens_per_s,
                    failed_requests=rs.failed, ttft_mean_s=pct(rs.ttft, "mean"),
                    tpot_mean_s=pct(rs.tpot, "mean"), tpot_p50_s=pct(rs.tpot, "p50"),
                    e2e_p50_s=pct(rs.e2e, "p50"),
                    acceptance_rate=ra.acceptance_rate if ra else None,
                    mean_acceptance_length=ra.mean_acceptance_length if ra else None,
                    server_generation_tokens=run.server_generation_tokens,
                    output_digests={r.request_id: r.text_digest for r in run.requests
                                    if r.ok and r.greedy and r.text_digest},
                    output_token_ids={r.request_id: list(r.token_ids) for r in run.requests
                                      if r.ok and r.greedy and r.token_ids} if m.spec is None else None,
                    # The reference pass's margins belong to the first run's tokens.
                    output_margins=m.reference_margins if m.spec is None and run is m.runs[0] else None,
                    greedy_match_rate=check.match_rate if check else None,
                    greedy_near_tie_rate=check.near_tie_rate if check else None,
                    first_divergence=check.first_divergence if check else None,
                    marks=list(run.marks) or None, remeasured=list(run.remeasured) or None,
                    server_tpot_mean_s=run.server_latency.tpot_mean_s if run.server_latency else None,
                    request_acceptance=run.request_acceptance.to_dict() if run.request_acceptance else None,
                ))

    def baseline_outputs(self, study_name: str, load: str) -> tuple[dict[str, str], dict[str, list[int]],
                                                                    dict[str, list[float | None]]] | None:
        """Greedy outputs of the study's newest completed baseline at ``load`` (its first run),
        if any: request id -> text digest, request id -> token ids, and request id -> per-token
        margins of the baseline's top two candidates (empty where they were not recorded). Each
        load is checked against the baseline's run at that same load: with --requests-per-client
        the loads replay different requests."""
        query = (select(TrialRun).join(TrialRecord).join(StudyRun)
                 .where(StudyRun.study_name == study_name, TrialRecord.status == "complete",
                        TrialRun.repeat == 0, TrialRun.load == load)
                 .options(selectinload(TrialRun.trial))
                 .order_by(TrialRecord.id.desc()))
        with Session(self.engine) as session:
            # A JSON null is not SQL NULL, so the baseline (config None) is picked here.
            for run in session.scalars(query):
                if run.trial.config is None:
                    return (dict(run.output_digests), dict(run.output_token_ids or {}),
                            dict(run.output_margins or {}))
        return None

    def mark_stale_running(self, study_name: str) -> int:
        """Trials left 'running' by a process that died are 'interrupted'; returns how many."""
        with Session(self.engine) as session, session.begin():
            stale = session.scalars(
                select(TrialRecord).join(StudyRun).where(
                    StudyRun.study_name == study_name, TrialRecord.status == "running")).all()
            for trial in stale:
                trial.status, trial.finished_at = "interrupted", _now()
                trial.failure_cause = "the tuner stopped during this trial"
            for run in session.scalars(select(StudyRun).where(
                    StudyRun.study_name == study_name, StudyRun.status == "running")):
                run.status, run.finished_at = "interrupted", run.finished_at or _now()
            return len(stale)

    def fail_running_trial(self, study_name: str, number: int, cause: str) -> None:
        """A trial whose worker died (another worker found its heartbeat stale)."""
        with Session(self.engine) as session, session.begin():
            for trial in session.scalars(
                    select(TrialRecord).join(StudyRun).where(
                        StudyRun.study_name == study_name, TrialRecord.optuna_trial_number == number,
                        TrialRecord.status == "running")):
                trial.status, trial.finished_at, trial.failure_cause = "failed", _now(), cause

    def trials(self, study_name: str | None = None, model: str | None = None,
               workload_type: str | None = None) -> list[TrialRow]:
        query = (select(TrialRecord).join(StudyRun).join(TargetModel).join(WorkloadRecord)
                 .options(selectinload(TrialRecord.metrics),
                          selectinload(TrialRecord.runs).load_only(TrialRun.load, TrialRun.output_tokens_per_s),
                          selectinload(TrialRecord.study_run)
                          .selectinload(StudyRun.model), selectinload(TrialRecord.study_run)
                          .selectinload(StudyRun.workload))
                 .order_by(TrialRecord.id))
        if study_name:
            query = query.where(StudyRun.study_name == study_name)
        if model:
            query = query.where(TargetModel.name == model)
        if workload_type:
            query = query.where(WorkloadRecord.type == workload_type)
        with Session(self.engine) as session:
            return [row for t in session.scalars(query) for row in self._rows(t)]

    def run_tokens_per_s(self, study_name: str) -> dict[tuple[int, str], list[float]]:
        """(Optuna trial number, load) -> tokens/s of each replay, for resampling the noise."""
        query = (select(TrialRecord.optuna_trial_number, TrialRun.load, TrialRun.output_tokens_per_s)
                 .join(TrialRun.trial).join(StudyRun)
                 .where(StudyRun.study_name == study_name, TrialRecord.status == "complete")
                 .order_by(TrialRun.id))
        found: dict[tuple[int, str], list[float]] = {}
        with Session(self.engine) as session:
            for number, load, tps in session.execute(query):
                found.setdefault((number, load), []).append(tps)
        return found

    def measured_origins(self, study_name: str) -> list[RunOrigin]:
        """Where each earlier run of the study that completed a trial measured: the figures a
        resumed run may be compared and pooled with."""
        query = (select(StudyRun).options(selectinload(StudyRun.workload))
                 .where(StudyRun.study_name == study_name,
                        StudyRun.trials.any(TrialRecord.status == "complete"))
                 .order_by(StudyRun.id))
        with Session(self.engine) as session:
            return [RunOrigin(run.host, run.gpu_name, run.vllm_version, run.workload.content_hash,
                              run.workload.file_name) for run in session.scalars(query)]

    def study_runs(self, study_name: str) -> list[dict[str, Any]]:
        """The runs of one study, oldest first, with what each stored about itself."""
        with Session(self.engine) as session:
            runs = session.scalars(select(StudyRun).where(StudyRun.study_name == study_name)
                                   .order_by(StudyRun.id))
            return [{"id": r.id, "status": r.status, "strategy": r.strategy, "slos": r.slos,
                     "pareto_front": r.pareto_front, "k_by_batch_size": r.k_by_batch_size,
                     "load": r.load, "space": r.space, "started_at": r.started_at, "request": r.request,
                     **self._rules(r)}
                    for r in runs]

    @staticmethod
    def _rules(run: StudyRun) -> dict[str, Any]:
        """What a study's answer must honour, as its run stored it."""
        return {"slos": run.slos, "k_by_batch_size": run.k_by_batch_size,
                "server_args": list(run.server_args), "deploy_args": list(run.deploy_args or []),
                "max_output_change": run.max_output_change,
                "allow_output_change": bool(run.allow_output_change),
                "synthetic_acceptance": run.synthetic_acceptance, "noise": run.noise}

    def study_rules(self, study_name: str | None = None) -> dict[str, dict[str, Any]]:
        """Study name -> the latest run's targets, k by batch size, server and deploy arguments and
        output-change rule: what its verdict is decided under; ``study_name``: that study's only."""
        latest: dict[str, dict[str, Any]] = {}
        query = select(StudyRun).order_by(StudyRun.id)
        if study_name is not None:
            query = query.where(StudyRun.study_name == study_name)
        with Session(self.engine) as session:
            for run in session.scalars(query):
                schedule = latest.get(run.study_name, {}).get("k_by_batch_size")
                latest[run.study_name] = self._rules(run)
                # A helper worker's run (--workers, `tuner worker`) measures no schedule: the
                # creator's record stands.
                latest[run.study_name]["k_by_batch_size"] = run.k_by_batch_size or schedule
        return latest

    def studies(self) -> list[dict[str, Any]]:
        """Every study, newest first: its name, model, workload type, load and latest run."""
        query = (select(StudyRun).options(selectinload(StudyRun.model), selectinload(StudyRun.workload))
                 .order_by(StudyRun.id))
        latest: dict[str, dict[str, Any]] = {}
        with Session(self.engine) as session:
            for run in session.scalars(query):
                first = latest.get(run.study_name, {}).get("started_at", run.started_at)
                latest[run.study_name] = {
                    "name": run.study_name, "model": run.model.name, "workload_type": run.workload.type,
                    "load": run.load, "status": run.status, "strategy": run.strategy,
                    "started_at": first, "last_run_at": run.started_at, "finished_at": run.finished_at,
                    "vllm_version": run.vllm_version, "host": run.host, "gpu_name": run.gpu_name}
        return sorted(latest.values(), key=lambda s: s["last_run_at"], reverse=True)

    @classmethod
    def _rows(cls, t: TrialRecord) -> list[TrialRow]:
        """One row per load the trial was measured at; one row without figures if none."""
        return [cls._row(t, m) for m in t.metrics] or [cls._row(t, None)]

    @staticmethod
    def _row(t: TrialRecord, m: TrialMetrics | None) -> TrialRow:
        run = t.study_run
        return TrialRow(
            study_name=run.study_name, model=run.model.name, workload_type=run.workload.type,
            load=m.load if m else run.load, optuna_trial_number=t.optuna_trial_number, config=t.config,
            label=t.label, status=t.status, failure_cause=t.failure_cause,
            server_log_path=t.server_log_path,
            tokens_per_s=m.output_tokens_per_s if m else None,
            tpot_p50_s=m.tpot_p50_s if m else None, ttft_p50_s=m.ttft_p50_s if m else None,
            acceptance_rate=m.acceptance_rate if m else None,
            mean_acceptance_length=m.mean_acceptance_length if m else None,
            per_position=m.per_position_acceptance if m else None,
            request_acceptance=m.request_acceptance if m else None,
            acceptance_by_context=m.acceptance_by_context if m else None,
            finished_at=t.finished_at, vllm_version=t.vllm_version, host=run.host,
            server_args=list(run.server_args),
            repeats=m.repeats if m else 1,
            tokens_per_s_mad=m.tokens_per_s_mad if m else None,
            tokens_per_s_precision=m.tokens_per_s_precision if m else None,
            tokens_per_s_ci=(m.tokens_per_s_ci_low, m.tokens_per_s_ci_high)
            if m and m.tokens_per_s_ci_low is not None else None,
            greedy_match_rate=m.greedy_match_rate if m else None,
            greedy_near_tie_rate=m.greedy_near_tie_rate if m else None,
            ttft_p99_s=m.ttft_p99_s if m else None, tpot_p99_s=m.tpot_p99_s if m else None,
            e2e_p99_s=m.e2e_p99_s if m else None, kind=t.kind,
            predicted_tokens_per_s=t.predicted_tokens_per_s, predicted_sigma=t.predicted_sigma,
            proposal_reason=t.proposal_reason, failed_requests=m.failed_requests if m else None,
            first_divergence=m.first_divergence if m else None,
            marks=tuple(m.marks or ()) if m else (),
            server_tpot_mean_s=m.server_tpot_mean_s if m else None,
            server_ttft_mean_s=m.server_ttft_mean_s if m else None,
            deploy_args=tuple(run.deploy_args or ()),
            startup_s=t.startup_s,
            trial_s=(t.finished_at - t.started_at).total_seconds() if t.finished_at and t.started_at else None,
            drafts=m.drafts if m else None, draft_tokens=m.draft_tokens if m else None,
            replays=tuple(r.output_tokens_per_s for r in t.runs if r.load == m.load) if m else (),
        )
