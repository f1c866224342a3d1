"""The results schema (SQLAlchemy 2.0 typed models). Tables are prefixed ``tuner_`` because
Optuna's own tables (``studies``, ``trials``, ...) live in the same database."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, Boolean, DateTime, Float, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


# A trial that met a fault of the host, not of its config: rerun by the next run, never its result.
NOT_MEASURED = "not measured"

class Base(DeclarativeBase):
    pass


class TargetModel(Base):
    __tablename__ = "tuner_models"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(500), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class WorkloadRecord(Base):
    __tablename__ = "tuner_workloads"
    __table_args__ = (UniqueConstraint("type", "content_hash"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    type: Mapped[str] = mapped_column(String(100))
    file_name: Mapped[str] = mapped_column(String(500))
    content_hash: Mapped[str] = mapped_column(String(64))
    request_count: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class StudyRun(Base):
    """One invocation of ``tuner optimize``; a resumed study gets a new run on the same Optuna study."""

    __tablename__ = "tuner_study_runs"

    id: Mapped[int] = mapped_column(primary_key=True)
    study_name: Mapped[str] = mapped_column(String(500), index=True)  # the Optuna study
    model_id: Mapped[int] = mapped_column(ForeignKey("tuner_models.id"))
    workload_id: Mapped[int] = mapped_column(ForeignKey("tuner_workloads.id"))
    space: Mapped[dict] = mapped_column(JSON)
    load: Mapped[str] = mapped_column(String(200))
    server_args: Mapped[list] = mapped_column(JSON)
    vllm_version: Mapped[str | None] = mapped_column(String(100))
    host: Mapped[str] = mapped_column(String(200))
    gpu_name: Mapped[str | None] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(20))  # running, finished, interrupted
    strategy: Mapped[str | None] = mapped_column(String(20))  # guided, tpe, grid
    slos: Mapped[list | None] = mapped_column(JSON)  # latency targets, like "tpot_p99_ms<=40"
    # Per load: trial numbers on the front of tokens/s versus p99 TPOT, rewritten as trials end.
    pareto_front: Mapped[dict | None] = mapped_column(JSON)
    # The k-by-batch-size schedule tuned over several loads, with its measurement per load.
    k_by_batch_size: Mapped[dict | None] = mapped_column(JSON)
    # Server arguments marked --deploy-arg: kept in the `vllm serve` line of the answer, where
    # the other server arguments (tuning-only, like --enforce-eager) are dropped.
    deploy_args: Mapped[list | None] = mapped_column(JSON)
    # Share of greedy requests a config may change against the baseline and still be chosen
    # (None: 0); allow_output_change: chosen whatever it changed.
    max_output_change: Mapped[float | None] = mapped_column(Float)
    allow_output_change: Mapped[bool | None] = mapped_column(Boolean)
    # --synthetic-acceptance, like "0.74,0.54": vLLM accepted drafts at these rates, whatever the
    # target said, so greedy output was not expected to match the baseline's.
    synthetic_acceptance: Mapped[str | None] = mapped_column(String(200))
    # --noise: how much a winner must beat the baseline by (and the tie tolerance); every later
    # reading of the study (tuner best, the dashboard, drift) decides under it.
    noise: Mapped[float | None] = mapped_column(Float)
    # The StudyRequest this run ran (tuner/plan/request.py), as JSON.
    request: Mapped[dict | None] = mapped_column(JSON)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    model: Mapped[TargetModel] = relationship()
    workload: Mapped[WorkloadRecord] = relationship()
    trials: Mapped[list[TrialRecord]] = relationship(back_populates="study_run")


class TrialRecord(Base):
    __tablename__ = "tuner_trials"

    id: Mapped[int] = mapped_column(primary_key=True)
    study_run_id: Mapped[int] = mapped_column(ForeignKey("tuner_study_runs.id"), index=True)
    optuna_trial_number: Mapped[int] = mapped_column(Integer)
    config: Mapped[dict | None] = mapped_column(JSON)  # vLLM speculative config; None = baseline
    label: Mapped[str] = mapped_column(String(500))
    # "study": a point of the search space; "k_by_batch_size": the final check of a
    # k-by-batch-size schedule, which is not a point of the space and never the single-config winner.
    kind: Mapped[str] = mapped_column(String(20), server_default="study")
    # running, complete, failed (the config's own failure), interrupted, or NOT_MEASURED
    status: Mapped[str] = mapped_column(String(20))
    # What the step-cost model expected before the trial ran (guided search), to show its error.
    predicted_tokens_per_s: Mapped[float | None] = mapped_column(Float)
    predicted_sigma: Mapped[float | None] = mapped_column(Float)
    proposal_reason: Mapped[str | None] = mapped_column(Text)
    failure_cause: Mapped[str | None] = mapped_column(Text)
    server_log_path: Mapped[str | None] = mapped_column(String(1000))
    server_command: Mapped[list | None] = mapped_column(JSON)  # to reproduce the figure
    startup_s: Mapped[float | None] = mapped_column(Float)
    replay_s: Mapped[float | None] = mapped_column(Float)
    vllm_version: Mapped[str | None] = mapped_column(String(100))
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    study_run: Mapped[StudyRun] = relationship(back_populates="trials")
    metrics: Mapped[list[TrialMetrics]] = relationship(back_populates="trial", order_by="TrialMetrics.id")
    runs: Mapped[list[TrialRun]] = relationship(back_populates="trial", order_by="TrialRun.repeat")


class TrialMetrics(Base):
    """A trial's figures at one load: those of its median run, with the spread of tokens/s over
    its runs. A trial over several loads (``--concurrency 1,4,16``) has one row per load."""

    __tablename__ = "tuner_trial_metrics"
    __table_args__ = (UniqueConstraint("trial_id", "load"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("tuner_trials.id"), index=True)
    load: Mapped[str] = mapped_column(String(200))
    output_tokens_per_s: Mapped[float] = mapped_column(Float)
    requests_per_s: Mapped[float] = mapped_column(Float)
    requests: Mapped[int] = mapped_column(Integer)
    failed_requests: Mapped[int] = mapped_column(Integer)
    output_tokens: Mapped[int] = mapped_column(Integer)
    ttft_p50_s: Mapped[float | None] = mapped_column(Float)
    ttft_p90_s: Mapped[float | None] = mapped_column(Float)
    ttft_p99_s: Mapped[float | None] = mapped_column(Float)
    tpot_p50_s: Mapped[float | None] = mapped_column(Float)
    tpot_p90_s: Mapped[float | None] = mapped_column(Float)
    tpot_p99_s: Mapped[float | None] = mapped_column(Float)
    e2e_p50_s: Mapped[float | None] = mapped_column(Float)
    e2e_p90_s: Mapped[float | None] = mapped_column(Float)
    e2e_p99_s: Mapped[float | None] = mapped_column(Float)
    errors: Mapped[list] = mapped_column(JSON)
    acceptance_rate: Mapped[float | None] = mapped_column(Float)
    mean_acceptance_length: Mapped[float | None] = mapped_column(Float)
    per_position_acceptance: Mapped[list | None] = mapped_column(JSON)
    drafts: Mapped[int | None] = mapped_column(Integer)
    draft_tokens: Mapped[int | None] = mapped_column(Integer)
    accepted_tokens: Mapped[int | None] = mapped_column(Integer)
    server_generation_tokens: Mapped[int] = mapped_column(Integer)
    repeats: Mapped[int] = mapped_column(Integer, server_default="1")
    tokens_per_s_mad: Mapped[float | None] = mapped_column(Float)
    # Half the 95 % t-interval of the replays' mean tokens/s, relative (None from one replay).
    tokens_per_s_precision: Mapped[float | None] = mapped_column(Float)
    tokens_per_s_ci_low: Mapped[float | None] = mapped_column(Float)
    tokens_per_s_ci_high: Mapped[float | None] = mapped_column(Float)
    # Share of greedy (temperature 0) requests whose text equals the baseline's, in the worst of
    # the trial's runs; None for the baseline itself or without greedy requests. Below 1, the
    # config changed greedy output; first_divergence: where, {"run", "request", "token", "margin",
    # "near_tie"}. greedy_near_tie_rate: the share that differ only where the baseline's top two
    # candidates were within the near-tie margin (tuner/decide/output_check.py).
    greedy_match_rate: Mapped[float | None] = mapped_column(Float)
    first_divergence: Mapped[dict | None] = mapped_column(JSON)
    greedy_near_tie_rate: Mapped[float | None] = mapped_column(Float)
    # Why figures cannot be trusted (tuner.decide.marks): the median run's marks, and repeats disagreeing.
    marks: Mapped[list | None] = mapped_column(JSON)
    # The median run's server-side means (vLLM's histograms), the cross-check of the client's.
    server_ttft_mean_s: Mapped[float | None] = mapped_column(Float)
    server_tpot_mean_s: Mapped[float | None] = mapped_column(Float)
    server_e2e_mean_s: Mapped[float | None] = mapped_column(Float)
    # The median run's acceptance as its requests saw it (tuner/replay/acceptance.py): the total
    # held against the counters ({"source", "steps", "accepted_tokens", ...}), and the acceptance
    # length per context-length bucket ([{"from", "to", "steps", "acceptance_length"}, ...]).
    request_acceptance: Mapped[dict | None] = mapped_column(JSON)
    acceptance_by_context: Mapped[list | None] = mapped_column(JSON)

    trial: Mapped[TrialRecord] = relationship(back_populates="metrics")


class TrialRun(Base):
    """One replay of the workload within a trial (``--repeats`` gives several)."""

    __tablename__ = "tuner_trial_runs"
    __table_args__ = (UniqueConstraint("trial_id", "load", "repeat"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("tuner_trials.id"), index=True)
    load: Mapped[str] = mapped_column(String(200))
    repeat: Mapped[int] = mapped_column(Integer)
    output_tokens_per_s: Mapped[float] = mapped_column(Float)
    failed_requests: Mapped[int] = mapped_column(Integer)
    ttft_mean_s: Mapped[float | None] = mapped_column(Float)
    tpot_mean_s: Mapped[float | None] = mapped_column(Float)
    tpot_p50_s: Mapped[float | None] = mapped_column(Float)
    e2e_p50_s: Mapped[float | None] = mapped_column(Float)
    acceptance_rate: Mapped[float | None] = mapped_column(Float)
    mean_acceptance_length: Mapped[float | None] = mapped_column(Float)
    server_generation_tokens: Mapped[int] = mapped_column(Integer)
    output_digests: Mapped[dict] = mapped_column(JSON)  # request id -> digest of the greedy text
    # request id -> generated token ids of greedy requests: kept for baseline runs only, the
    # reference the first diverging token of other configs is located against.
    output_token_ids: Mapped[dict | None] = mapped_column(JSON)
    # Baseline runs only: request id -> per token, the lead of its log-probability over the
    # runner-up's (vLLM's top-2 logprobs, from a pass after the measured replays).
    output_margins: Mapped[dict | None] = mapped_column(JSON)
    greedy_match_rate: Mapped[float | None] = mapped_column(Float)
    first_divergence: Mapped[dict | None] = mapped_column(JSON)
    greedy_near_tie_rate: Mapped[float | None] = mapped_column(Float)
    marks: Mapped[list | None] = mapped_column(JSON)
    remeasured: Mapped[list | None] = mapped_column(JSON)  # marks of the replay this one replaced
    server_tpot_mean_s: Mapped[float | None] = mapped_column(Float)
    # This replay's acceptance per request and by context length (RequestAcceptance.to_dict).
    request_acceptance: Mapped[dict | None] = mapped_column(JSON)

    trial: Mapped[TrialRecord] = relationship(back_populates="runs")


class Schedule(Base):
    """A recurring tuning job (``tuner schedule add``): when, and which `tuner optimize` to run."""

    __tablename__ = "tuner_schedules"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    cron: Mapped[str] = mapped_column(String(100))
    timezone: Mapped[str] = mapped_column(String(64))
    model: Mapped[str] = mapped_column(String(500))
    workload: Mapped[str] = mapped_column(String(1000))  # path on the service's host
    workload_type: Mapped[str] = mapped_column(String(100))
    # The StudyRequest of its jobs (tuner/plan/request.py), as JSON, without name and database;
    # None for a schedule stored by a tuner before the request existed (it must be added again).
    request: Mapped[dict | None] = mapped_column(JSON)
    gpus: Mapped[str | None] = mapped_column(String(100))  # "0,1"; None = every GPU of the host
    # The model_name label of this model on the production vLLM servers Prometheus scrapes.
    live_model_name: Mapped[str | None] = mapped_column(String(500))
    enabled: Mapped[bool] = mapped_column(Boolean, server_default="1")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    # When the service last acted on a due time; every time missed since then is one job.
    last_fired_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Job(Base):
    """One run of a schedule: a `tuner optimize` child process of `tuner serve`."""

    __tablename__ = "tuner_jobs"

    id: Mapped[int] = mapped_column(primary_key=True)
    schedule_id: Mapped[int | None] = mapped_column(ForeignKey("tuner_schedules.id", ondelete="SET NULL"),
                                                    index=True)
    schedule_name: Mapped[str] = mapped_column(String(200))  # kept when the schedule is removed
    reason: Mapped[str] = mapped_column(String(20))  # schedule, run-now, drift
    detail: Mapped[str | None] = mapped_column(Text)  # why, e.g. the drift seen
    model: Mapped[str] = mapped_column(String(500))
    study_name: Mapped[str] = mapped_column(String(500))  # a resumed job continues this study
    request: Mapped[dict | None] = mapped_column(JSON)  # the StudyRequest it runs, named; see Schedule
    gpus: Mapped[str | None] = mapped_column(String(100))
    status: Mapped[str] = mapped_column(String(20), index=True)  # queued, running, finished, failed, interrupted
    attempts: Mapped[int] = mapped_column(Integer, server_default="0")
    pid: Mapped[int | None] = mapped_column(Integer)
    exit_code: Mapped[int | None] = mapped_column(Integer)
    log_path: Mapped[str | None] = mapped_column(String(1000))
    # Against the previous study of the same model, workload type and load: first, new best,
    # unchanged or regressed (by more than the noise).
    outcome: Mapped[str | None] = mapped_column(String(20))
    outcome_detail: Mapped[str | None] = mapped_column(Text)
    due_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class DriftEvent(Base):
    """Live acceptance (from Prometheus) stayed below what the tuning measured."""

    __tablename__ = "tuner_drift_events"

    id: Mapped[int] = mapped_column(primary_key=True)
    model: Mapped[str] = mapped_column(String(500))  # as tuned
    live_model_name: Mapped[str] = mapped_column(String(500))
    live_acceptance_rate: Mapped[float | None] = mapped_column(Float)
    live_acceptance_length: Mapped[float | None] = mapped_column(Float)
    tuned_acceptance_rate: Mapped[float | None] = mapped_column(Float)
    tuned_acceptance_length: Mapped[float | None] = mapped_column(Float)
    tuned_study: Mapped[str] = mapped_column(String(500))
    margin: Mapped[float] = mapped_column(Float)
    held_s: Mapped[float] = mapped_column(Float)
    job_id: Mapped[int | None] = mapped_column(ForeignKey("tuner_jobs.id", ondelete="SET NULL"))
    note: Mapped[str] = mapped_column(Text)
    detected_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
