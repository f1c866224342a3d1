"""Reads and writes of `tuner serve`: schedules, their jobs, and drift events.

Claiming a job is one conditional UPDATE (queued -> running), so two processes on the same
database (the service and `tuner schedule run-now --foreground`) never run the same job twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import Engine, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from tuner.errors import UsageError
from tuner.store.models import DriftEvent, Job, Schedule

ACTIVE = ("queued", "running")


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _utc(value: datetime | None) -> datetime | None:
    """SQLite hands back naive datetimes; everything here is UTC."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class ScheduleRow:
    id: int
    name: str
    cron: str
    timezone: str
    model: str
    workload: str
    workload_type: str
    request: dict | None  # a StudyRequest without name and database (tuner/plan/request.py)
    gpus: str | None
    live_model_name: str | None
    enabled: bool
    created_at: datetime
    last_fired_at: datetime | None

    @property
    def live_name(self) -> str:
        """The model_name label to watch on production servers."""
        return self.live_model_name or self.model

    @classmethod
    def of(cls, s: Schedule) -> ScheduleRow:
        return cls(s.id, s.name, s.cron, s.timezone, s.model, s.workload, s.workload_type,
                   s.request, s.gpus, s.live_model_name, bool(s.enabled),
                   _utc(s.created_at), _utc(s.last_fired_at))


@dataclass(frozen=True)
class JobRow:
    id: int
    schedule_id: int | None
    schedule_name: str
    reason: str
    detail: str | None
    model: str
    study_name: str
    request: dict | None  # the StudyRequest it runs, named
    gpus: str | None
    status: str
    attempts: int
    pid: int | None
    exit_code: int | None
    log_path: str | None
    outcome: str | None
    outcome_detail: str | None
    due_at: datetime
    started_at: datetime | None
    finished_at: datetime | None

    @classmethod
    def of(cls, j: Job) -> JobRow:
        return cls(j.id, j.schedule_id, j.schedule_name, j.reason, j.detail, j.model, j.study_name,
                   j.request, j.gpus, j.status, j.attempts, j.pid, j.exit_code, j.log_path,
                   j.outcome, j.outcome_detail, _utc(j.due_at), _utc(j.started_at), _utc(j.finished_at))

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        for key in ("due_at", "started_at", "finished_at"):
            out[key] = out[key].isoformat() if out[key] else None
        return out


@dataclass(frozen=True)
class DriftRow:
    id: int
    model: str
    live_model_name: str
    live_acceptance_rate: float | None
    live_acceptance_length: float | None
    tuned_acceptance_rate: float | None
    tuned_acceptance_length: float | None
    tuned_study: str
    margin: float
    held_s: float
    job_id: int | None
    note: str
    detected_at: datetime

    @classmethod
    def of(cls, d: DriftEvent) -> DriftRow:
        return cls(d.id, d.model, d.live_model_name, d.live_acceptance_rate, d.live_acceptance_length,
                   d.tuned_acceptance_rate, d.tuned_acceptance_length, d.tuned_study, d.margin, d.held_s,
                   d.job_id, d.note, _utc(d.detected_at))


class JobStore:
    def __init__(self, engine: Engine):
        self.engine = engine

    # schedules

    def add_schedule(self, *, name: str, cron: str, timezone: str, model: str, workload: str,
                     workload_type: str, request: dict, gpus: str | None = None,
                     live_model_name: str | None = None) -> ScheduleRow:
        with Session(self.engine) as session:
            schedule = Schedule(name=name, cron=cron, timezone=timezone, model=model, workload=workload,
                                workload_type=workload_type, request=request, gpus=gpus,
                                live_model_name=live_model_name, enabled=True, created_at=_now())
            session.add(schedule)
            try:
                session.commit()
            except IntegrityError:
                raise UsageError(f"a schedule named {name!r} exists already; pick another --name "
                                 "or `tuner schedule remove` it first") from None
            return ScheduleRow.of(schedule)

    def schedules(self) -> list[ScheduleRow]:
        with Session(self.engine) as session:
            return [ScheduleRow.of(s) for s in session.scalars(select(Schedule).order_by(Schedule.name))]

    def schedule(self, name: str) -> ScheduleRow | None:
        with Session(self.engine) as session:
            found = session.scalars(select(Schedule).where(Schedule.name == name)).first()
            return ScheduleRow.of(found) if found else None

    def remove_schedule(self, name: str) -> bool:
        """Removes the schedule and its queued jobs; jobs already run keep their record."""
        with Session(self.engine) as session:
            found = session.scalars(select(Schedule).where(Schedule.name == name)).first()
            if found is None:
                return False
            for job in session.scalars(select(Job).where(Job.schedule_id == found.id)):
                job.schedule_id = None
                if job.status == "queued":
                    session.delete(job)
            session.delete(found)
            session.commit()
            return True

    def set_fired(self, schedule_id: int, at: datetime) -> None:
        with Session(self.engine) as session:
            session.execute(update(Schedule).where(Schedule.id == schedule_id).values(last_fired_at=at))
            session.commit()

    # jobs

    def enqueue(self, schedule: ScheduleRow, *, reason: str, study_name: str, request: dict | None,
                due_at: datetime, detail: str | None = None) -> JobRow:
        with Session(self.engine) as session:
            job = Job(schedule_id=schedule.id, schedule_name=schedule.name, reason=reason, detail=detail,
                      model=schedule.model, study_name=study_name, request=request, gpus=schedule.gpus,
                      status="queued", attempts=0, due_at=due_at)
            session.add(job)
            session.commit()
            return JobRow.of(job)

    def job(self, job_id: int) -> JobRow | None:
        with Session(self.engine) as session:
            found = session.get(Job, job_id)
            return JobRow.of(found) if found else None

    def jobs(self, status: tuple[str, ...] | None = None, limit: int | None = None,
             model: str | None = None, schedule_id: int | None = None) -> list[JobRow]:
        """Newest first, except queued jobs, which come in the order they will run."""
        query = select(Job)
        if status:
            query = query.where(Job.status.in_(status))
        if model:
            query = query.where(Job.model == model)
        if schedule_id is not None:
            query = query.where(Job.schedule_id == schedule_id)
        if status == ("queued",):
            query = query.order_by(Job.due_at, Job.id)
        else:
            query = query.order_by(Job.id.desc())
        if limit:
            query = query.limit(limit)
        with Session(self.engine) as session:
            return [JobRow.of(j) for j in session.scalars(query)]

    def active_job(self, schedule_id: int) -> JobRow | None:
        with Session(self.engine) as session:
            found = session.scalars(select(Job).where(Job.schedule_id == schedule_id,
                                                      Job.status.in_(ACTIVE))).first()
            return JobRow.of(found) if found else None

    def claim(self, job_id: int, log_path: str) -> bool:
        """queued -> running; False when another process took it first."""
        with Session(self.engine) as session:
            result = session.execute(
                update(Job).where(Job.id == job_id, Job.status == "queued")
                .values(status="running", started_at=_now(), finished_at=None, log_path=log_path,
                        attempts=Job.attempts + 1, exit_code=None, pid=None))
            session.commit()
            return result.rowcount == 1

    def set_pid(self, job_id: int, pid: int) -> None:
        with Session(self.engine) as session:
            session.execute(update(Job).where(Job.id == job_id).values(pid=pid))
            session.commit()

    def finish(self, job_id: int, status: str, exit_code: int | None, outcome: str | None = None,
               outcome_detail: str | None = None) -> None:
        with Session(self.engine) as session:
            session.execute(update(Job).where(Job.id == job_id).values(
                status=status, exit_code=exit_code, finished_at=_now(), outcome=outcome,
                outcome_detail=outcome_detail))
            session.commit()

    def requeue_unfinished(self) -> list[JobRow]:
        """Jobs a stopped service left running or interrupted go back to the queue, ahead of
        later ones (their due time is kept); their study resumes where it stopped."""
        with Session(self.engine) as session:
            found = list(session.scalars(select(Job).where(Job.status.in_(("running", "interrupted")))))
            for job in found:
                job.status = "queued"
            session.commit()
            return [JobRow.of(j) for j in found]

    # drift

    def add_drift_event(self, **fields: Any) -> DriftRow:
        with Session(self.engine) as session:
            event = DriftEvent(detected_at=_now(), **fields)
            session.add(event)
            session.commit()
            return DriftRow.of(event)

    def drift_events(self, limit: int | None = None) -> list[DriftRow]:
        query = select(DriftEvent).order_by(DriftEvent.id.desc())
        if limit:
            query = query.limit(limit)
        with Session(self.engine) as session:
            return [DriftRow.of(d) for d in session.scalars(query)]
