"""Storing one ingest batch's spans: one COPY, its sessions in one upsert.

The request path only checks and keeps the raw batch (traces/batches.py); a
worker parses it and calls `store_spans`.

PostgreSQL gets the fast path (COPY straight into the span table, then a
single INSERT ... ON CONFLICT for the sessions); other databases (SQLite in
development) get a multi-row insert and a loop over the request's sessions.
Either way the number of queries does not grow with the number of spans, and
a span already stored (a client retrying a batch) is skipped, not duplicated.
"""

from collections import defaultdict
from operator import itemgetter

from django.db import connection, transaction
from django.db.models import F, JSONField
from django.db.models.functions import Greatest, Least
from django.utils import timezone
from psycopg.errors import UniqueViolation
from psycopg.types.json import Jsonb

from belvedir.core import bulk

from . import otlp, workload_keys
from .extract import SESSION_KEYS, extract, session_of, to_datetime
from .messages import MAX_METADATA_KEYS
from .models import Span, TraceSession

SESSION_KEY_SET = frozenset(SESSION_KEYS)
SPAN_COLUMNS = bulk.columns(Span)
SPAN_FIELDS = [f.attname for f in SPAN_COLUMNS]
# orjson: span attributes and messages are serialised for every span, and the
# standard library's encoder was the largest single cost of ingest.
JSON_COLUMN_INDEXES = [i for i, f in enumerate(SPAN_COLUMNS) if isinstance(f, JSONField)]


def store_spans(project, raw_spans: list[dict], *, received_at=None, confine_to: str | None = None, redact=None) -> int:
    """Store parsed spans and update their sessions, in one transaction; returns how many were kept.

    `received_at`: when the platform accepted them (a batch's arrival, which
    can be a little before a worker stores it); now by default.
    `confine_to` (a workload key's session, workload_keys): spans naming another
    session are dropped, and spans naming none join it, so a run or a trial
    can write only its own session, never decide another session's data; the
    session is linked to it. "" (its workload has ended): nothing is kept.
    `redact` (a run key's batch): the rows with the run's secrets masked.
    The rows, not the spans: extraction decodes the JSON inside attribute
    values (messages), whose escapes could spell a secret no scan of the
    spans would see; what is masked here is what is stored.
    """
    now = timezone.now()
    project_id, received_at = project.pk, received_at or now
    rows = confined([_row(project_id, raw, received_at) for raw in raw_spans], confine_to)
    if redact is not None:
        rows = redact(rows)
    with transaction.atomic():
        if connection.vendor == "postgresql":
            inserted = _copy_spans(rows)
            # Totals of the spans actually stored: a batch sent twice (an
            # exporter retrying, or two at once) counts once.
            _upsert_sessions_postgres(project, _session_totals(inserted), now)
        else:
            Span.objects.bulk_create([Span(**{k: row[k] for k in SPAN_FIELDS}) for row in rows], batch_size=500, ignore_conflicts=True)
            _upsert_sessions_portable(project, _session_totals(rows), now)
        if confine_to and rows:
            _link(project, confine_to)
    return len(rows)


def _link(project, session_id: str):
    """A workload key's own session linked to its workload (workload_keys), once: a no-op after its first batch."""
    field, pk = workload_keys.link(session_id)
    TraceSession.objects.filter(project=project, session_id=session_id, **{field: None}).update(**{field: pk})


def confined(rows: list[dict], session: str | None) -> list[dict]:
    """The rows a key confined to `session` may write (all of them when None, none when "")."""
    if session is None:
        return rows
    if not session:
        return []
    for row in rows:
        row["session_id"] = row["session_id"] or session
    return [row for row in rows if row["session_id"] == session]


def foreign_spans(raw_spans: list[dict], session: str | None) -> int:
    """How many spans name a session other than `session` (which a per-run key may not write)."""
    if session is None:
        return 0
    return sum(1 for raw in raw_spans if extract(raw)["session_id"] not in ("", session))


def foreign_in_body(body: bytes, content_type: str, session: str) -> int:
    """`foreign_spans` of a request body that `otlp.check` passed, read by each span's session attributes alone where it can be.

    A run key's request counts what the worker will refuse, before it
    answers: parsing the whole body (and extracting every span) for that
    took three times the CPU of a project key's request.
    """
    try:
        found = otlp.span_attributes(body, content_type, SESSION_KEY_SET)
        if found is None:
            return foreign_spans(otlp.parse(body, content_type).spans, session)
    except otlp.IngestError:
        return 0  # the worker refuses the batch whole, and records why
    return sum(1 for attributes in found if session_of(attributes) not in ("", session))


def _row(project_id, raw: dict, received_at) -> dict:
    return {
        "project_id": project_id,
        "trace_id": raw["trace_id"],
        "span_id": raw["span_id"],
        "parent_span_id": raw["parent_span_id"],
        "name": raw["name"],
        "kind": raw["kind"],
        "start_time": to_datetime(raw["start"]),
        "end_time": to_datetime(raw["end"]),
        "start_unix_nano": raw["start"],
        "end_unix_nano": raw["end"],
        "status_code": raw["status_code"],
        "status_message": raw["status_message"],
        "events": raw["events"],
        "resource": raw["resource"],
        "scope": raw["scope"],
        "received_at": received_at,
        "task_id": None,
        **extract(raw),
    }


def _session_totals(rows) -> dict[str, dict]:
    totals: dict[str, dict] = defaultdict(lambda: {"n": 0, "inp": 0, "out": 0, "first": None, "last": None, "user": "", "metadata": {}})
    for row in rows:
        if not row["session_id"]:
            continue
        t = totals[row["session_id"]]
        # Who and what the session is about: the latest span that says wins.
        if row["user_id"]:
            t["user"] = row["user_id"]
        for key, value in row["association"].items():
            if key in t["metadata"] or len(t["metadata"]) < MAX_METADATA_KEYS:
                t["metadata"][key] = value
        t["n"] += 1
        t["inp"] += row["input_tokens"] or 0
        t["out"] += row["output_tokens"] or 0
        if t["first"] is None or row["start_time"] < t["first"]:
            t["first"] = row["start_time"]
        if t["last"] is None or row["end_time"] > t["last"]:
            t["last"] = row["end_time"]
    return totals


def _copy_spans(rows) -> list[dict]:
    """Store the rows; return those that were new (the rest were stored before)."""
    if not rows:
        return rows
    table = connection.ops.quote_name(Span._meta.db_table)
    values = _copy_values(rows)
    try:
        # Straight into the table: COPY cannot skip conflicts, but a batch
        # sent for the first time has none, and this is half the writing of
        # going through a temporary table.
        with transaction.atomic(), connection.cursor() as cursor:
            bulk.copy_rows(cursor, table, SPAN_COLUMNS, values)
        return rows
    except UniqueViolation:
        # Some spans are stored already (an exporter re-sending a batch whose
        # answer it never got): stage them and keep only the new ones.
        with connection.cursor() as cursor:
            names = bulk.stage(cursor, "span_incoming", table, SPAN_COLUMNS, values)
            cursor.execute(f"INSERT INTO {table} ({names}) SELECT {names} FROM span_incoming ON CONFLICT DO NOTHING RETURNING trace_id, span_id")
            new = set(cursor.fetchall())
            cursor.execute("TRUNCATE span_incoming")
        return [row for row in rows if (row["trace_id"], row["span_id"]) in new]


def _copy_values(rows) -> list[list]:
    """The rows as binary COPY takes them, in column order, jsonb columns already in its wire format (bulk.jsonb)."""
    get = itemgetter(*SPAN_FIELDS)
    values = []
    for row in rows:
        value = list(get(row))
        for i in JSON_COLUMN_INDEXES:
            value[i] = bulk.jsonb(value[i])
        values.append(value)
    return values


def _upsert_sessions_postgres(project, sessions, now):
    if not sessions:
        return
    # One array per column, whatever the number of sessions: the statement's
    # text stays the same, so psycopg converts it once per process (a VALUES
    # list of 20 sessions was 220 placeholders, split again on every batch).
    columns = [list(sessions), *zip(*[_session_values(t) for t in sessions.values()], strict=True)]
    sql = f"""
        INSERT INTO traces_tracesession (project_id, session_id, first_span_at, last_span_at, span_count,
                                         input_tokens, output_tokens, user_id, metadata, outcome, needs_processing, last_received_at)
        SELECT %s, s.*, '', true, %s
        FROM unnest(%s::text[], %s::timestamptz[], %s::timestamptz[], %s::int[], %s::bigint[], %s::bigint[], %s::text[], %s::jsonb[]) AS s
        ON CONFLICT (project_id, session_id) DO UPDATE SET
            span_count = traces_tracesession.span_count + EXCLUDED.span_count,
            input_tokens = traces_tracesession.input_tokens + EXCLUDED.input_tokens,
            output_tokens = traces_tracesession.output_tokens + EXCLUDED.output_tokens,
            first_span_at = LEAST(traces_tracesession.first_span_at, EXCLUDED.first_span_at),
            last_span_at = GREATEST(traces_tracesession.last_span_at, EXCLUDED.last_span_at),
            needs_processing = true,
            last_received_at = EXCLUDED.last_received_at,
            user_id = COALESCE(NULLIF(EXCLUDED.user_id, ''), traces_tracesession.user_id),
            -- A session keeps at most MAX_METADATA_KEYS keys: past that, new ones are dropped.
            metadata = CASE WHEN EXCLUDED.metadata = '{{}}' THEN traces_tracesession.metadata
                            WHEN (SELECT count(*) FROM jsonb_object_keys(traces_tracesession.metadata || EXCLUDED.metadata)) > {MAX_METADATA_KEYS}
                            THEN traces_tracesession.metadata
                            ELSE traces_tracesession.metadata || EXCLUDED.metadata END
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [project.pk, now, *map(list, columns)])


def _session_values(t: dict) -> tuple:
    return t["first"], t["last"], t["n"], t["inp"], t["out"], t["user"], Jsonb(t["metadata"])


def _upsert_sessions_portable(project, sessions, now):
    if not sessions:
        return
    TraceSession.objects.bulk_create(
        [TraceSession(project=project, session_id=sid, first_span_at=t["first"], last_span_at=t["last"], user_id=t["user"]) for sid, t in sessions.items()],
        ignore_conflicts=True,
    )
    for session_id, t in sessions.items():
        if t["user"] or t["metadata"]:
            session = TraceSession.objects.get(project=project, session_id=session_id)
            merged = {**session.metadata, **t["metadata"]}
            TraceSession.objects.filter(pk=session.pk).update(
                user_id=t["user"] or session.user_id, metadata=merged if len(merged) <= MAX_METADATA_KEYS else session.metadata
            )
        TraceSession.objects.filter(project=project, session_id=session_id).update(
            span_count=F("span_count") + t["n"],
            input_tokens=F("input_tokens") + t["inp"],
            output_tokens=F("output_tokens") + t["out"],
            first_span_at=Least("first_span_at", t["first"]),
            last_span_at=Greatest("last_span_at", t["last"]),
            needs_processing=True,
            last_received_at=now,
        )
