"""Rows written in bulk with PostgreSQL's binary COPY: the hot paths' writes (trace ingest, the eval engine's
samples and its response cache), where the ORM's per-value work was most of the cost.

`bulk_create` prepares every value of every row in Python (the field's
`get_db_prep_save`, then psycopg quotes it into the statement's text on the
client): at 512 requests in flight that was a third of the eval engine's
CPU, taken from the event loop through the GIL (bench/eval_engine.py).
Binary COPY sends the values as they are, dumped in C.

PostgreSQL only: callers keep the ORM's path for other databases (SQLite in
development), and choose what a conflict means (COPY cannot skip one).
"""

import re
from collections.abc import Iterable, Sequence
from functools import cache

import orjson
from django.db import connection
from django.db.models import Field, JSONField, Model
from psycopg.types.string import BytesBinaryDumper


def is_postgresql() -> bool:
    return connection.vendor == "postgresql"


@cache
def columns(model: type[Model]) -> tuple[Field, ...]:
    """The model's columns but its primary key, in the order `copy_rows` takes values."""
    return tuple(f for f in model._meta.concrete_fields if not f.primary_key)


def jsonb(value) -> bytes:
    """A JSON column's value as binary COPY takes it.

    Binary COPY names no type per field: the server reads each with its
    column's own receive function, and jsonb's takes a version byte (1) and
    the JSON text. Sent as bytea, that costs psycopg nothing per value, where
    a `Jsonb` wrapper went through two Python dumper calls.
    """
    return b"\x01" + orjson.dumps(value)


def copy_rows(cursor, table: str, fields: Sequence[Field], rows: Iterable[Sequence]):
    """Each row's values, in `fields`' order (JSON columns through `jsonb`), copied into `table` (a model's, or a
    temporary table of its columns) with one binary COPY."""
    names = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    # Binary: no text escaping of every value (write_row ~14 ms per 1,000 spans instead of ~22-38 in text).
    raw = cursor.cursor
    # bytea's binary dumper by default is psycopg's DB-API one, in Python (it
    # unwraps `Binary`); the plain one is in C: a third of a COPY's CPU here.
    raw.adapters.register_dumper(None, BytesBinaryDumper)
    with raw.copy(f"COPY {table} ({names}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(column_types(tuple(fields)))
        for row in rows:
            copy.write_row(row)


def stage(cursor, name: str, table: str, fields: Sequence[Field], rows: Iterable[Sequence]) -> str:
    """The rows copied into a temporary table `name` of `table`'s `fields` (made once per connection, emptied at
    commit), for an INSERT ... SELECT that decides what a conflict means; the column list, for that SELECT."""
    names = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    cursor.execute(f"CREATE TEMP TABLE IF NOT EXISTS {name} ON COMMIT DELETE ROWS AS SELECT {names} FROM {table} WITH NO DATA")
    copy_rows(cursor, name, fields, rows)
    return names


@cache
def column_types(fields: tuple[Field, ...]) -> tuple[str, ...]:
    """The columns' PostgreSQL types as binary COPY must be told them ("varchar(32)" -> "varchar"; jsonb: see `jsonb`).

    Worked out once per process: asking each field, per batch, cost ~0.5 ms.
    """
    return tuple("bytea" if isinstance(f, JSONField) else re.sub(r"\(.*?\)", "", f.db_type(connection)).split(" CHECK")[0].strip() for f in fields)
