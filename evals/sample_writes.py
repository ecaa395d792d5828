"""A row's sample as the engine builds it, and how a batch of them is stored.

The engine makes one of these per row on its event loop, so it is a plain
slotted object rather than a `Sample`: a model instance costs its field
defaults and two signals (pre_init, post_init) each, 5 % of the engine's
samples under py-spy at 512 in flight. A batch goes to PostgreSQL in one
binary COPY (belvedir/core/bulk.py), to SQLite in one prepared statement run
for every row; both skip nothing but rows stored meanwhile (a second pass of
the same eval), so a row scored once is never stored twice.
"""

from dataclasses import dataclass, field, fields
from functools import cache

import orjson
from django.db import connection, transaction
from django.utils import timezone
from psycopg import IntegrityError as PostgresIntegrityError

from belvedir.core import bulk

from .models import Sample


@dataclass(slots=True)
class NewSample:
    """Sample's columns (but its id and created_at), as the engine fills them in."""

    eval_id: int
    row_index: int
    input: str
    reference: str
    category: dict
    error: str = ""
    output: str = ""
    extracted: str = ""
    score: float | None = None
    scores: dict = field(default_factory=dict)
    latency_ms: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    judge_prompt_tokens: int | None = None
    judge_completion_tokens: int | None = None
    completions: list = field(default_factory=list)
    cache_hits: int = 0


NAMES = tuple(f.name for f in fields(NewSample))
JSON_INDEXES = tuple(i for i, name in enumerate(NAMES) if name in ("scores", "category", "completions"))


def store(batch: list[NewSample]):
    """The batch stored; rows of it already stored (by another pass of the same eval) are skipped."""
    if not batch:
        return
    now = timezone.now()
    if bulk.is_postgresql():
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                bulk.copy_rows(cursor, connection.ops.quote_name(Sample._meta.db_table), _columns(), (_values(sample, now, bulk.jsonb) for sample in batch))
            return
        except PostgresIntegrityError:
            # Rows stored meanwhile by another pass of the eval: the ORM's path below skips them (anything else it
            # raises again, as Django's IntegrityError).
            Sample.objects.bulk_create([Sample(**{name: getattr(s, name) for name in NAMES}, created_at=now) for s in batch], ignore_conflicts=True)
            return
    # Elsewhere (SQLite, `make run`): one prepared statement run for every row, JSON as its text. bulk_create
    # prepared every value in Python, in the engine's own process.
    now = connection.ops.adapt_datetimefield_value(now)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.executemany(_insert(), [_values(sample, now, _json_text) for sample in batch])


@cache
def _columns():
    by_name = {f.name: f for f in bulk.columns(Sample)}
    return [by_name[name if name != "eval_id" else "eval"] for name in NAMES] + [by_name["created_at"]]


@cache
def _insert() -> str:
    names = ", ".join(connection.ops.quote_name(f.column) for f in _columns())
    places = ", ".join(["%s"] * len(_columns()))
    return f"INSERT INTO {connection.ops.quote_name(Sample._meta.db_table)} ({names}) VALUES ({places}) ON CONFLICT DO NOTHING"


def _json_text(value) -> str:
    return orjson.dumps(value).decode()


def _values(sample: NewSample, now, json) -> list:
    values = [getattr(sample, name) for name in NAMES]
    for i in JSON_INDEXES:
        values[i] = json(values[i])
    values.append(now)
    return values
