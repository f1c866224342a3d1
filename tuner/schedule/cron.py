"""When a schedule is due: cron expressions (croniter) in a named time zone.

Five fields as in crontab ("0 2 * * *" = 02:00 every day), or six where the sixth gives
seconds (croniter's convention: "* * * * * */20" = every 20 seconds), which tests use.
"""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from tuner.errors import UsageError


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise UsageError(f"--tz {name!r} is not a time zone; use an IANA name like UTC or "
                         "Europe/Berlin") from None


def check_cron(cron: str, tz: str) -> None:
    zone(tz)
    if len(cron.split()) not in (5, 6) or not croniter.is_valid(cron):
        raise UsageError(f"--cron {cron!r} is not a cron expression; write five fields like "
                         "\"0 2 * * *\" (02:00 daily), or six with seconds last")


def next_time(cron: str, tz: str, after: datetime) -> datetime:
    """The first time strictly after ``after`` that the expression names, in ``tz``'s wall time."""
    return croniter(cron, after.astimezone(zone(tz))).get_next(datetime)


def is_due(cron: str, tz: str, last: datetime, now: datetime) -> bool:
    """A due time passed since ``last``: one job, however many due times were missed."""
    return next_time(cron, tz, last) <= now
