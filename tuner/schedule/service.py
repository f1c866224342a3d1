"""The loop of `tuner serve`: enqueue due and drifting schedules, start and record jobs.

Every few seconds (one tick): schedules whose cron time passed get one job each (however many
times were missed while the service was down), the drift check runs when its interval is up,
ended jobs are recorded with their outcome, and queued jobs whose GPUs are free start.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timezone

from tuner.errors import TunerError
from tuner.metrics.prometheus import PrometheusSource
from tuner.schedule.config import ServeSettings
from tuner.schedule.cron import is_due
from tuner.schedule.drift import DriftWatch, references
from tuner.schedule.runner import JobRunner
from tuner.store import Database, JobRow, JobStore, ScheduleRow

log = logging.getLogger("tuner.serve")


def study_name_for(schedule: ScheduleRow, at: datetime) -> str:
    """A new name per run: the study warm-starts from the previous one instead of resuming it."""
    return f"{schedule.name} {at.astimezone(timezone.utc):%Y-%m-%d %H:%M:%S}"


def enqueue_run(jobs: JobStore, schedule: ScheduleRow, reason: str, now: datetime,
                detail: str | None = None) -> JobRow:
    """A job running the schedule's request under a study name of its own."""
    study = study_name_for(schedule, now)
    request = {**schedule.request, "name": study} if schedule.request else None
    return jobs.enqueue(schedule, reason=reason, study_name=study, request=request, due_at=now, detail=detail)


class TuningService:
    def __init__(self, settings: ServeSettings, database: Database, *, tick_s: float = 2.0,
                 noise: float = 0.05, stop_grace_s: float = 120.0):
        """``noise``: the margin for a job's study that stored none; ``stop_grace_s``: how long
        a running job's `tuner optimize` has to stop its server before it is killed."""
        self.settings, self.tick_s, self.stop_grace_s = settings, tick_s, stop_grace_s
        self.jobs, self.results = database.jobs, database.results
        self.runner = JobRunner(database, settings.log_dir, noise)
        self.source = (PrometheusSource(settings.prometheus, settings.drift_window)
                       if settings.prometheus else None)
        self.drift = DriftWatch(settings.drift_margin, settings.drift_for)
        self._next_drift_check = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # one tick

    def fire_due(self, now: datetime) -> list[JobRow]:
        queued = []
        for schedule in self.jobs.schedules():
            last = schedule.last_fired_at or schedule.created_at
            if not schedule.enabled or not is_due(schedule.cron, schedule.timezone, last, now):
                continue
            self.jobs.set_fired(schedule.id, now)
            if active := self.jobs.active_job(schedule.id):
                log.info("schedule %s is due but job %d is still %s; not queued again",
                         schedule.name, active.id, active.status)
                continue
            queued.append(enqueue_run(self.jobs, schedule, "schedule", now))
        return queued

    def check_drift(self, now: datetime) -> list[JobRow]:
        if self.source is None:
            return []
        try:
            live = self.source.read()
        except TunerError as exc:
            log.warning("drift check skipped: %s", exc)
            return []
        queued = []
        for finding in self.drift.check(now, references(self.results, self.jobs.schedules()), live):
            schedule = finding.reference.schedule
            active = self.jobs.active_job(schedule.id)
            job = None if active else enqueue_run(self.jobs, schedule, "drift", now, finding.text)
            note = (f"re-tune queued as job {job.id}" if job
                    else f"no re-tune queued: job {active.id} is already {active.status}")
            self.jobs.add_drift_event(
                model=schedule.model, live_model_name=schedule.live_name,
                live_acceptance_rate=finding.live.rate, live_acceptance_length=finding.live.length,
                tuned_acceptance_rate=finding.reference.rate, tuned_acceptance_length=finding.reference.length,
                tuned_study=finding.reference.study_name, margin=finding.margin, held_s=finding.held_s,
                job_id=job.id if job else None, note=f"{finding.text}; {note}")
            log.warning("drift: %s; %s", finding.text, note)
            if job:
                queued.append(job)
        return queued

    def tick(self, now: datetime | None = None) -> None:
        now = now or datetime.now(timezone.utc)
        self.fire_due(now)
        if self.source is not None and time.monotonic() >= self._next_drift_check:
            self._next_drift_check = time.monotonic() + self.settings.drift_every
            self.check_drift(now)
        self.runner.poll()
        self.runner.start_ready()

    # lifetime

    def start(self) -> None:
        """Resume what a previous service left unfinished, then tick in a thread."""
        self.runner.stop_leftovers()
        for job in self.jobs.requeue_unfinished():
            log.info("job %d (%s) was interrupted; it resumes study %r", job.id, job.schedule_name,
                     job.study_name)
        self._thread = threading.Thread(target=self._loop, name="tuner-serve", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception:  # one bad tick (database busy, a job's bad log) must not end the service
                log.exception("tick failed")
            self._stop.wait(self.tick_s)

    def stop(self) -> None:
        """Stop ticking, then stop running jobs: their servers go down, their trials stay."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.runner.stop_all(self.stop_grace_s)
