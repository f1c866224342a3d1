"""Schedules as shown by `tuner schedule list` and the dashboard: with their next run."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from tuner.plan.request import summary
from tuner.schedule.cron import next_time
from tuner.store import JobStore


def schedule_views(jobs: JobStore, now: datetime | None = None) -> list[dict[str, Any]]:
    now = now or datetime.now(timezone.utc)
    views = []
    for s in jobs.schedules():
        last = s.last_fired_at or s.created_at
        due = next_time(s.cron, s.timezone, last)
        latest = jobs.jobs(limit=1, schedule_id=s.id)
        views.append({
            "name": s.name, "cron": s.cron, "timezone": s.timezone, "model": s.model,
            "workload": s.workload, "workload_type": s.workload_type, "request": s.request,
            "study": summary(s.request),
            "gpus": s.gpus, "live_model_name": s.live_name, "enabled": s.enabled,
            "last_fired_at": s.last_fired_at.isoformat(timespec="seconds") if s.last_fired_at else None,
            # A time already past means: runs at the service's next tick.
            "next_run": max(due, now).astimezone(due.tzinfo).isoformat(timespec="seconds"),
            "last_job": latest[0].to_dict() if latest else None,
        })
    return views
