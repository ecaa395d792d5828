"""Cron expressions, checked: five fields in UTC (croniter parses them), no faster than once a minute, never "never"."""

from datetime import UTC, datetime, timedelta

from croniter import CroniterBadCronError, CroniterBadDateError, croniter

MAX_LENGTH = 100
# A year of runs, counted; past this many the rest is extrapolated (an every-minute cron has 43,200 a month).
COUNT_LIMIT = 2000
YEAR = timedelta(days=365)
MONTH = YEAR / 12


class CronError(ValueError):
    """A cron expression this platform refuses; the message names it."""


def check(expression: str) -> str:
    """The expression, normalised; CronError when it is not five fields, is malformed, or never fires."""
    text = " ".join((expression or "").split())
    if not text or len(text) > MAX_LENGTH:
        raise CronError(f"A schedule is a cron expression of 1 to {MAX_LENGTH} characters, such as 0 3 * * * (every night at 03:00 UTC).")
    fields = text.split(" ")
    if len(fields) != 5:
        # croniter reads a sixth field as seconds: a schedule more often than once a minute.
        raise CronError(
            f"{text!r} has {len(fields)} field{'s' if len(fields) != 1 else ''}: give five (minute hour day month weekday); schedules run at most once a minute."
        )
    if not croniter.is_valid(text):
        raise CronError(f"{text!r} is not a cron expression: five fields, minute hour day month weekday, such as 0 3 * * *.")
    try:
        following(text, datetime(2000, 1, 1, tzinfo=UTC))
    except (CroniterBadCronError, CroniterBadDateError, ValueError):
        raise CronError(f"{text!r} never runs (no date matches it): check its day and month.") from None
    return text


def following(expression: str, after: datetime) -> datetime:
    """The first time the expression fires strictly after `after` (UTC)."""
    return croniter(expression, after.astimezone(UTC), max_years_between_matches=5).get_next(datetime)


def runs_per_month(expression: str) -> float:
    """How many times a month it fires, averaged over a year from a fixed date (so every caller agrees, and a
    schedule of some months only is counted by the months it runs in); past COUNT_LIMIT, extrapolated."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    it = croniter(expression, start, max_years_between_matches=5)
    count, when = 0, start
    while count < COUNT_LIMIT:
        when = it.get_next(datetime)
        if when - start > YEAR:
            return count / 12
        count += 1
    return count * (MONTH / (when - start))
