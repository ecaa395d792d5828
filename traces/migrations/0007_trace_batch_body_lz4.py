"""Accepted request bodies are kept lz4-compressed where the server has lz4.

0005 stored them uncompressed because pglz cost the request more than it
saved. lz4 is several times cheaper: per 1,000-span JSON body, PostgreSQL's
own CPU for accepting it fell from ~10 to ~7.5 ms and for storing its spans
from ~37 to ~34.5 ms, and the bench's 2.1 MB body takes 326 KB of table
and WAL (real prompts compress less).
A server built without lz4 keeps 0005's uncompressed storage.
"""

from django.db import NotSupportedError, migrations, transaction


def lz4_where_available(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    try:
        # A savepoint: on a server built without lz4 this fails, and the migration goes on.
        with transaction.atomic(using=schema_editor.connection.alias):
            schema_editor.execute("ALTER TABLE traces_tracebatch ALTER COLUMN body SET STORAGE EXTENDED, ALTER COLUMN body SET COMPRESSION lz4")
    except NotSupportedError:
        pass  # "compression method lz4 not supported": 0005's storage stays


def uncompressed(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("ALTER TABLE traces_tracebatch ALTER COLUMN body SET STORAGE EXTERNAL, ALTER COLUMN body SET COMPRESSION default")


class Migration(migrations.Migration):
    dependencies = [("traces", "0006_partition_spans_by_month")]
    operations = [migrations.RunPython(lz4_where_available, uncompressed)]
