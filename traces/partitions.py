"""The span table's monthly partitions (PostgreSQL) and trace retention.

On PostgreSQL `traces_span` is partitioned by range of `start_time`, one
partition per calendar month (UTC), named `traces_span_YYYY_MM` (migration
0006). Retention then drops whole months — no DELETE of millions of rows,
no vacuum debt — and a batch whose spans fall in a month without a
partition gets one first (`ensure_months`), so a client's clock never makes
a span unstorable. SQLite (`make run`) keeps a plain table; retention there
deletes rows.
"""

import logging
import re
from datetime import UTC, datetime

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from .extract import to_datetime
from .models import IngestRejection, Span, Task, TraceSession

logger = logging.getLogger(__name__)

PARENT = "traces_span"
NAME = re.compile(r"traces_span_(\d{4})_(\d{2})\Z")
# Months a worker has seen exist: checked once per process, not per batch.
_known: set[tuple[int, int]] = set()


def month_of(moment: datetime) -> tuple[int, int]:
    moment = moment.astimezone(UTC)
    return moment.year, moment.month


def months_of(unix_nanos: list[int]) -> set[tuple[int, int]]:
    """The months of these instants (nanoseconds since the epoch), as their spans' start_time falls.

    Most batches lie within one month, which its first and last instants
    show (to_datetime keeps order): a datetime per span was ~2 ms a batch.
    """
    if not unix_nanos:
        return set()
    first, last = month_of(to_datetime(min(unix_nanos))), month_of(to_datetime(max(unix_nanos)))
    return {first} if first == last else {month_of(to_datetime(nanos)) for nanos in unix_nanos}


def _shift(month: tuple[int, int], by: int) -> tuple[int, int]:
    index = month[0] * 12 + month[1] - 1 + by
    return index // 12, index % 12 + 1


def _start(month: tuple[int, int]) -> datetime:
    return datetime(month[0], month[1], 1, tzinfo=UTC)


def partitioned() -> bool:
    return connection.vendor == "postgresql"


def existing_months() -> set[tuple[int, int]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = %s::regclass", [PARENT])
        return {(int(m[1]), int(m[2])) for (name,) in cursor.fetchall() if (m := NAME.match(name))}


def forget_known():
    _known.clear()


def missing_months(months: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """Months among these without a partition (asks the database only about months not seen before)."""
    if not partitioned() or months <= _known:
        return set()
    _known.clear()
    _known.update(existing_months())
    return months - _known


def ensure_months(months: set[tuple[int, int]]):
    """Create the partitions these months need. Outside any transaction: DDL on the parent locks it."""
    for month in sorted(missing_months(months)):
        name = f"{PARENT}_{month[0]:04d}_{month[1]:02d}"
        try:
            with transaction.atomic():
                with connection.cursor() as cursor:
                    _short_lock_wait(cursor)
                    cursor.execute(
                        f"CREATE TABLE IF NOT EXISTS {name} PARTITION OF {PARENT} FOR VALUES FROM (%s) TO (%s)",
                        [_start(month), _start(_shift(month, 1))],
                    )
        except DatabaseError:
            # Another worker created it between our look and our CREATE.
            if month not in existing_months():
                raise
        _known.add(month)


def _short_lock_wait(cursor):
    # Attaching or dropping a partition locks the whole span table; queued
    # behind a long dashboard query it would block every read after it.
    # Give up quickly instead: the batch waits, the next pass tries again.
    cursor.execute("SET LOCAL lock_timeout = '2s'")


def retention_cutoff(now: datetime) -> datetime | None:
    """Spans that started before this are past retention (a month boundary); None keeps everything."""
    months = settings.TRACE_RETENTION_MONTHS
    if not months:
        return None
    # A month's partition goes once all of it is older than the retention
    # period, so nothing younger than that is ever dropped.
    return _start(_shift(month_of(now), -months))


def apply_retention(now: datetime | None = None) -> list[str]:
    """Drop the months past retention, tidy what pointed at them, make the coming months. Returns what it dropped."""
    now = now or timezone.now()
    cutoff = retention_cutoff(now)
    dropped = []
    if cutoff is not None:
        dropped = _drop_before(cutoff)
        _forget_emptied_sessions(cutoff)
        IngestRejection.objects.filter(created_at__lt=cutoff).delete()
    if partitioned():
        ensure_months({month_of(now), _shift(month_of(now), 1)})
    return dropped


def _drop_before(cutoff: datetime) -> list[str]:
    if not partitioned():
        deleted, _ = Span.objects.filter(start_time__lt=cutoff).delete()
        return [f"{deleted} spans"] if deleted else []
    old = sorted(month for month in existing_months() if _start(_shift(month, 1)) <= cutoff)
    names = [f"{PARENT}_{y:04d}_{m:02d}" for y, m in old]
    for name in names:
        with transaction.atomic(), connection.cursor() as cursor:
            _short_lock_wait(cursor)
            cursor.execute(f"DROP TABLE {name}")
        logger.info("Trace retention dropped partition %s", name)
    _known.difference_update(old)
    return names


def _forget_emptied_sessions(cutoff: datetime):
    """After old spans go: sessions that lost some are re-segmented; those that lost all go, except a run's.

    A session linked to a harness run or a job's trial keeps its row
    (outcome, token totals): it is the workload's record. Its tasks go with its spans.
    """
    had_old_spans = TraceSession.objects.filter(first_span_at__lt=cutoff)
    has_spans = Exists(Span.objects.filter(project=OuterRef("project"), session_id=OuterRef("session_id")))
    with transaction.atomic():
        had_old_spans.filter(has_spans).update(needs_processing=True)
        emptied = had_old_spans.exclude(has_spans)
        Task.objects.filter(session__in=emptied.values("pk")).delete()
        emptied.filter(run__isnull=True, trial__isnull=True).delete()
