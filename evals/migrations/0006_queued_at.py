import django.utils.timezone
from django.db import migrations, models

NAME = "requeue lost evals"


def schedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.update_or_create(
        name=NAME, defaults={"func": "evals.tasks.requeue_lost_evals", "schedule_type": "I", "minutes": 1, "repeats": -1}
    )


def unschedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("evals", "0005_stale_evals_go_through_the_sandbox_reaper"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [
        migrations.AddField(model_name="eval", name="queued_at", field=models.DateTimeField(default=django.utils.timezone.now)),
        migrations.RunPython(schedule, unschedule),
    ]
