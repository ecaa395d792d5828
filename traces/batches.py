"""Ingest that answers before it stores: accepted request bodies, then spans.

The request checks a body cheaply (`otlp.check`), keeps it whole as one
`TraceBatch` row and answers. A worker (`manage.py process_trace_batches`,
with a django-q2 schedule as the fallback) claims batches with
`FOR UPDATE SKIP LOCKED`, parses them, stores their spans and deletes them
in one transaction. So a batch is stored exactly once: a worker that dies
mid-batch rolls back, its lock goes with its connection, and the next
worker takes the batch whole; spans already stored (a client re-sending) are
skipped by the span table's unique constraint.
"""

import logging
import time
import weakref
from functools import partial

import psycopg
from django.conf import settings
from django.db import DatabaseError, DataError, IntegrityError, connection, transaction
from django.utils import timezone
from psycopg.errors import CheckViolation

from belvedir.core.collector import collector_paused
from belvedir.core.models import Project

from . import backlog, otlp, partitions, workload_keys
from .ingest import store_spans
from .models import IngestRejection, TraceBatch

logger = logging.getLogger(__name__)

# Batches per transaction. One: with several processors, a processor that
# claimed a few at once would leave the others idle while it works through
# them, and a commit (~6 ms) is small beside storing 1,000 spans (~70 ms).
BATCHES_PER_PASS = 1
# Each accepted batch is announced here, so an idle processor starts on it
# at once instead of at its next look (TRACE_BATCH_POLL_SECONDS).
CHANNEL = "trace_batches"
_listening = weakref.WeakSet()
ACCEPT_LOCK_TIMEOUT = "1s"


class _NeedPartitions(Exception):
    def __init__(self, months):
        self.months = months


def accept(project, api_key, raw: bytes, content_type: str, content_encoding: str, span_count: int, *, own_session: str | None = None) -> int:
    """Keep one checked request body; returns the batch's id. Durable on return (committed).

    `own_session`: the one session its key may write (`workload_keys.own_session`),
    found by the request and kept for the worker, which does not look it up again.
    """
    received_at = timezone.now()
    key_id = getattr(api_key, "pk", None)
    if connection.vendor != "postgresql":
        return TraceBatch.objects.create(
            project=project,
            api_key_id=key_id,
            own_session=own_session,
            body=raw,
            content_type=content_type[:100],
            content_encoding=content_encoding[:20],
            span_count=span_count,
            received_at=received_at,
        ).pk
    with transaction.atomic(), connection.cursor() as cursor:
        # The announcement goes out when this commits, and costs no round trip
        # of its own. The lock timeout: the batch's foreign key is checked at
        # commit, holding the project, which a deletion locks for all of its
        # run (`lock_out`); rather than hold a web worker that long, the
        # request gives up and answers 503 (DatabaseUnavailableMiddleware).
        cursor.execute(
            f"SELECT nextval(pg_get_serial_sequence('traces_tracebatch', 'id')), pg_notify('{CHANNEL}', ''), set_config('lock_timeout', '{ACCEPT_LOCK_TIMEOUT}', true)"
        )
        batch_id, _, _ = cursor.fetchone()
        # Binary COPY: the body travels as bytes. As a query parameter it
        # would be escaped to hex text twice its size, then parsed back.
        columns = "id, project_id, api_key_id, own_session, body, content_type, content_encoding, span_count, received_at"
        with cursor.cursor.copy(f"COPY traces_tracebatch ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "int8", "int8", "varchar", "bytea", "varchar", "varchar", "int4", "timestamptz"])
            copy.write_row([batch_id, project.pk, key_id, own_session, raw, content_type[:100], content_encoding[:20], span_count, received_at])
    return batch_id


def process_pending(limit: int = BATCHES_PER_PASS, only: list[int] | None = None, meter: backlog.Meter | None = None) -> int:
    """Store up to `limit` waiting batches (or just those in `only`); returns how many it took.

    `meter`: a processor's, told how many spans the pass stored and how long it took.
    """
    for _ in range(4):
        try:
            started = time.monotonic()
            # Around the call, not inside it: the collector must stay off
            # until the pass's parsed spans (~100,000 dicts and lists) are
            # freed with its frame. Re-enabled while they were alive, at the
            # commit, it ran over all of them and a full collection over
            # the whole process every few passes: 6.5 ms of a pass's 79 ms.
            with collector_paused():
                batches = _process(limit, only)
            if meter and batches:
                meter.stored(sum(batch.span_count for batch in batches), time.monotonic() - started)
            return len(batches)
        except _NeedPartitions as need:
            # Made outside the claiming transaction, which let its batches go.
            partitions.ensure_months(need.months)
        except (IntegrityError, CheckViolation) as exc:
            # A partition this process believed in is gone (dropped by
            # retention, or its creation rolled back): look again.
            if "no partition of relation" not in str(exc):
                raise
            partitions.forget_known()
    return 0  # partitions keep vanishing under us (retention running): the next pass tries again


def drain(stop=None, meter: backlog.Meter | None = None) -> int:
    """Every waiting batch, pass after pass, unless `stop` (an Event) is set."""
    total = 0
    while not (stop and stop.is_set()):
        done = process_pending(meter=meter)
        total += done
        if done < BATCHES_PER_PASS:
            break
    return total


def _process(limit: int, only: list[int] | None) -> list[TraceBatch]:
    with transaction.atomic():
        batches = _claim(limit, only)
        if not batches:
            return []
        if connection.vendor == "postgresql":
            _fetch_bodies(batches)
            # Not waiting for this commit's WAL flush is safe: the batch was
            # made durable when accepted, and is deleted in this transaction,
            # so a crash that loses the commit loses the deletion with it and
            # the batch is stored again. Spans become readable a flush sooner.
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL synchronous_commit = off")
        work = [(batch, _parse(batch)) for batch in batches]
        months = partitions.months_of([span["start"] for _, parsed in work if parsed for span in parsed.spans])
        if missing := partitions.missing_months(months):
            raise _NeedPartitions(missing)
        for batch, parsed in work:
            # A workload's key writes only its own session (the request already told the client).
            stored, reasons = _store(batch, parsed) if parsed else (0, batch.error)
            if stored < batch.span_count:
                _record_rejection(batch, batch.span_count - stored, reasons)
        TraceBatch.objects.filter(pk__in=[batch.pk for batch in batches]).delete()
    return batches


def _claim(limit: int, only: list[int] | None) -> list[TraceBatch]:
    """Up to `limit` waiting batches, oldest first, locked until this transaction ends; their bodies not loaded on PostgreSQL.

    Each batch's project is held too (FOR KEY SHARE), in the same statement:
    the span table has no foreign key on its project (its per-row check cost
    PostgreSQL a sixth of storing a batch), and this one lock per batch
    stands in for it. A project being deleted (`lock_out`) holds its row, so
    its batches are skipped like batches another worker holds, and the next
    project's are taken: they go with the project.
    """
    claimed = TraceBatch.objects.select_related("project", "api_key").order_by("pk")
    if connection.vendor != "postgresql":
        return list((claimed.filter(pk__in=only) if only is not None else claimed)[:limit])
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT b.id FROM traces_tracebatch b JOIN core_project p ON p.id = b.project_id"
            + (" WHERE b.id = ANY(%s)" if only is not None else "")
            + " ORDER BY b.id LIMIT %s FOR UPDATE OF b SKIP LOCKED FOR KEY SHARE OF p SKIP LOCKED",
            [only, limit] if only is not None else [limit],
        )
        ids = [row[0] for row in cursor.fetchall()]
    return list(claimed.defer("body").filter(pk__in=ids)) if ids else []


def lock_out(project):
    """Wait for any batch of `project` being stored, and let no other start, until this transaction ends.

    For deleting a project: its spans are deleted before it, and spans have
    no foreign key to refuse a worker's batch landing in between.
    """
    list(Project.objects.select_for_update().filter(pk=project.pk).values_list("pk"))


def _fetch_bodies(batches: list[TraceBatch]):
    """Load the claimed batches' bodies in binary.

    Through the ORM a body comes as query text: bytea in hex, twice its size,
    encoded by the server and decoded here, ~16 ms for a 1,000-span body
    where binary takes ~3.
    """
    # A plain psycopg cursor: Django's binds parameters client-side, which
    # cannot ask for binary results.
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        cursor.execute("SELECT id, body FROM traces_tracebatch WHERE id = ANY(%s)", [[batch.pk for batch in batches]], binary=True)
        bodies = dict(cursor.fetchall())
    for batch in batches:
        batch.body = bodies[batch.pk]


def _parse(batch: TraceBatch) -> otlp.Parsed | None:
    """The batch's spans, or None (with `batch.error` set) when the whole batch cannot be stored.

    The request has checked the body, so this fails only for what its cheap
    check does not look at. Parsing is deterministic: a batch that fails now
    would fail on every retry, so it is recorded and let go, not retried.
    """
    try:
        body = otlp.decode_body(bytes(batch.body), batch.content_encoding)
        parsed = otlp.parse(body, batch.content_type)
        batch.decoded_body = body  # what a run key's redaction scans first (workload_keys.redact)
    except otlp.IngestError as exc:
        batch.error = [exc.message]
        return None
    except (DatabaseError, MemoryError):
        raise
    except Exception as exc:
        logger.exception("Trace batch %s could not be parsed", batch.pk)
        batch.error = [f"The platform could not read this batch ({type(exc).__name__})."]
        return None
    return parsed


def _store(batch: TraceBatch, parsed: otlp.Parsed) -> tuple[int, list[str]]:
    """Store a parsed batch's spans: (how many were kept, why any were not).

    A batch whose content the database refuses is recorded and let go, like
    one that cannot be parsed: it would fail on every retry, claimed first
    each time (the oldest), and stop storage for everyone. `store_spans` runs
    in a savepoint, so the rest of the pass goes on. Parsing bounds the
    values it hands on; this is for what it has not foreseen.
    """
    try:
        # A workload's key: its secrets never reach the span table (nor what
        # is built from it: sessions, training data). Other keys' batches pay nothing.
        own = batch.own_session
        redact = partial(workload_keys.redact, own, source=batch.decoded_body) if own else None
        stored = store_spans(batch.project, parsed.spans, received_at=batch.received_at, confine_to=own, redact=redact)
    except (DataError, IntegrityError, psycopg.DataError, psycopg.IntegrityError, TypeError, ValueError, OverflowError) as exc:
        # (psycopg's own errors too: the COPY runs on its cursor, outside Django's error wrapping.)
        if "no partition of relation" in str(exc):
            raise  # not the batch's fault: process_pending makes the partition and tries again
        logger.exception("Trace batch %s could not be stored", batch.pk)
        return 0, [f"The platform could not store this batch ({type(exc).__name__})."]
    return stored, parsed.reasons + ([workload_keys.only_its_own(own)] if own else [])


def _record_rejection(batch: TraceBatch, rejected: int, reasons: list[str]):
    logger.warning("Trace batch %s: %s of %s spans rejected after acceptance: %s", batch.pk, rejected, batch.span_count, reasons)
    IngestRejection.objects.create(project=batch.project, api_key=batch.api_key, received_at=batch.received_at, rejected=rejected, reasons=reasons[:5])


def wait_for_batches(timeout: float):
    """Return when a batch is accepted (PostgreSQL's NOTIFY), or after `timeout` seconds at most.

    Announcements that came while the processor was busy are returned at
    once (psycopg keeps them), so a batch accepted between the processor's
    last look and this wait is not left for the timeout.
    """
    if connection.vendor != "postgresql":
        time.sleep(timeout)
        return
    connection.ensure_connection()
    raw = connection.connection
    if raw not in _listening:  # a new connection (CONN_MAX_AGE, or after an error)
        with connection.cursor() as cursor:
            cursor.execute(f"LISTEN {CHANNEL}")
        _listening.add(raw)
    with connection.wrap_database_errors:
        for _ in raw.notifies(timeout=timeout, stop_after=1):
            pass


def store_waiting(project, timeout: float = 5.0):
    """Store this project's accepted batches now, or wait (bounded) for the workers holding them.

    For answers that depend on spans a client has just sent: an SDK that
    flushes and then reports a session's outcome must find the session.
    """
    deadline = time.monotonic() + timeout
    while waiting := list(TraceBatch.objects.filter(project=project).order_by("pk").values_list("pk", flat=True)[:32]):
        process_pending(limit=len(waiting), only=waiting)
        if time.monotonic() > deadline:
            return
        if TraceBatch.objects.filter(pk__in=waiting).exists():
            time.sleep(0.05)  # held by a worker that is storing them right now


def lag_past_limit() -> float | None:
    """How long a batch accepted now would wait to be stored, when past TRACE_INGEST_MAX_LAG_SECONDS; else None.

    Past it, ingest answers 503 with Retry-After (OTLP exporters retry): when
    clients send faster than the processors store, refusing keeps accepted
    spans fresh and the waiting table bounded, where accepting would let
    both grow without end. `traces.backlog` estimates the wait.

    Refused at once, never held: holding a request up to 0.2 s past the
    limit for storage to catch up stored no more once the processors
    published their rates, and tripled the request p99 (docs/developing/bench/ingest.md,
    2026-12-05).
    """
    if settings.TRACE_INGEST_INLINE:
        return None
    lag = backlog.current_lag()
    return lag if lag > settings.TRACE_INGEST_MAX_LAG_SECONDS else None


def process_inline(batch_id: int):
    """Store a just-accepted batch before answering (TRACE_INGEST_INLINE: tests and debugging)."""
    if settings.TRACE_INGEST_INLINE:
        process_pending(only=[batch_id])
