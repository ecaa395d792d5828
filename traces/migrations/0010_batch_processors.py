"""Processors publish their storing rate, for ingest's push-back.

Web processes used to infer it from batches leaving the table between their
own looks; while the queue was shallower than the processors were many,
those looks saw idle processors as slow ones (traces/backlog.py).
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("traces", "0009_span_trace_id_index_dropped"),
    ]

    operations = [
        migrations.CreateModel(
            name="BatchProcessor",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(help_text="Host and process id.", max_length=255, unique=True)),
                ("spans_per_second", models.FloatField(help_text="While it had batches to store, over its recent ones; empty before its first.", null=True)),
                ("seen_at", models.DateTimeField()),
            ],
            options={
                "ordering": ["name"],
            },
        ),
    ]
