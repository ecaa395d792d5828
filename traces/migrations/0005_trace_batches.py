import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


def body_uncompressed(apps, schema_editor):
    # A request body is 1-5 MB of JSON, written once and read once: TOAST's
    # default pglz compression would cost the request more time than the
    # bytes it saves (and gzip bodies are stored compressed already).
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("ALTER TABLE traces_tracebatch ALTER COLUMN body SET STORAGE EXTERNAL")


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0004_invitation"),
        ("traces", "0004_session_user_and_metadata"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [
        migrations.CreateModel(
            name="IngestRejection",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("received_at", models.DateTimeField()),
                ("rejected", models.PositiveIntegerField()),
                ("reasons", models.JSONField(default=list)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                "ordering": ["-created_at"],
            },
        ),
        migrations.CreateModel(
            name="TraceBatch",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("body", models.BinaryField()),
                ("content_type", models.CharField(max_length=100)),
                ("content_encoding", models.CharField(blank=True, max_length=20)),
                ("span_count", models.PositiveIntegerField(default=0)),
                ("received_at", models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                "ordering": ["pk"],
            },
        ),
        migrations.AddField(
            model_name="ingestrejection",
            name="api_key",
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+", to="core.apikey"),
        ),
        migrations.AddField(
            model_name="ingestrejection",
            name="project",
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="+", to="core.project"),
        ),
        migrations.AddField(
            model_name="tracebatch",
            name="api_key",
            field=models.ForeignKey(db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+", to="core.apikey"),
        ),
        migrations.AddField(
            model_name="tracebatch",
            name="project",
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name="+", to="core.project"),
        ),
        migrations.RunPython(body_uncompressed, migrations.RunPython.noop),
    ]
