"""Processors publish what a batch costs them whatever its size, beside their rate of spans.

A rate of spans over whole passes follows the batch size (a pass has ~6 ms
of its own): after 1-span batches it read 158 spans/s, and one 1,000-span
batch waiting looked like 3 s of backlog (traces/backlog.py).
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("traces", "0011_span_columns_lz4"),
    ]

    operations = [
        migrations.AddField(
            model_name="batchprocessor",
            name="seconds_per_batch",
            field=models.FloatField(
                help_text="What any batch costs it, whatever its size (claiming it, its queries, the commit), from its batches of a few spans; empty before one.",
                null=True,
            ),
        ),
        migrations.AlterField(
            model_name="batchprocessor",
            name="spans_per_second",
            field=models.FloatField(
                help_text="While it had batches to store, over its recent ones, each batch's own cost taken off; empty before its first.", null=True
            ),
        ),
    ]
