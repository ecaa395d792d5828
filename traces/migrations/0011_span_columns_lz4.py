"""Spans' JSON and long text columns are compressed with lz4 where the server has lz4.

PostgreSQL compresses a row past ~2 KB before storing it, with pglz unless a
column says otherwise. Real prompts and completions run to tens of KB (the
bench's ~2 KB spans are never compressed): storing 3,000 spans with a ~9 KB
prompt each took 741 ms with pglz and 266 ms with lz4 (PostgreSQL 15, jsonb
input included), for about the same size on disk.

PostgreSQL 15 does not carry SET COMPRESSION from a partitioned table to its
partitions, so each existing month is altered too; months made later
(traces/partitions.py, PARTITION OF) take the parent's. Values already
stored keep their compression. A server built without lz4 keeps pglz, as
0007 does for batch bodies.
"""

from django.db import NotSupportedError, migrations, transaction

COLUMNS = ["attributes", "events", "resource", "prompt", "completion", "status_message"]


def _tables(schema_editor) -> list[str]:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = 'traces_span'::regclass")
        return ["traces_span", *(name for (name,) in cursor.fetchall())]


def _set_compression(schema_editor, method: str):
    for table in _tables(schema_editor):
        schema_editor.execute(f"ALTER TABLE {table} " + ", ".join(f"ALTER COLUMN {column} SET COMPRESSION {method}" for column in COLUMNS))


def lz4_where_available(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    try:
        # A savepoint: on a server built without lz4 this fails, and the migration goes on.
        with transaction.atomic(using=schema_editor.connection.alias):
            _set_compression(schema_editor, "lz4")
    except NotSupportedError:
        pass  # "compression method lz4 not supported": pglz stays


def default_compression(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        _set_compression(schema_editor, "default")


class Migration(migrations.Migration):
    dependencies = [("traces", "0010_batch_processors")]
    operations = [migrations.RunPython(lz4_where_available, default_compression)]
