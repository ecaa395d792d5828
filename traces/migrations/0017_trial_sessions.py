import django.db.models.deletion
from django.db import migrations, models
from django.db.models.functions import Cast


def keep_waiting_batches_confined(apps, schema_editor):
    """A batch accepted before this migration and not stored yet keeps what its key may write: its run's session,
    or none for a run's key whose run was gone."""
    TraceBatch = apps.get_model("traces", "TraceBatch")
    TraceBatch.objects.filter(run_id__isnull=False).update(own_session=Cast("run_id", models.CharField()))
    TraceBatch.objects.filter(run_id__isnull=True, api_key__per_run=True).update(own_session="")


class Migration(migrations.Migration):
    dependencies = [
        ("agent_tasks", "0005_trial_trace_key"),
        ("core", "0008_api_key_read_scope"),
        ("traces", "0016_evaluator_scorer"),
    ]

    operations = [
        migrations.AddField(
            model_name="tracebatch",
            name="own_session",
            field=models.CharField(blank=True, max_length=40, null=True),
        ),
        migrations.RunPython(keep_waiting_batches_confined, migrations.RunPython.noop),
        migrations.RemoveField(
            model_name="tracebatch",
            name="run_id",
        ),
        migrations.AddField(
            model_name="tracesession",
            name="trial",
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="trace_sessions", to="agent_tasks.trial"),
        ),
        migrations.AlterField(
            model_name="evaluator",
            name="source",
            field=models.CharField(
                choices=[
                    ("any", "Any session"),
                    ("production", "Production only (not from a harness run or a job's trial)"),
                    ("harness", "From harness runs only"),
                ],
                default="any",
                max_length=12,
            ),
        ),
    ]
