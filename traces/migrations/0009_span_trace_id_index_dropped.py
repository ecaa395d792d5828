"""Spans lose their index of trace ids alone.

Ingest paid for it on every span (about a tenth of PostgreSQL's work to COPY
a 1,000-span batch), for the admin's search by trace id only; that search now
probes the unique constraint's (project, trace_id, …) index once per project.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("traces", "0008_span_project_checked_per_batch"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="span",
            name="span_trace_id",
        ),
    ]
