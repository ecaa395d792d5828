from django.db import migrations


def schedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.update_or_create(
        name="resume stale evals",
        defaults={"func": "evals.tasks.resume_stale_evals", "schedule_type": "I", "minutes": 1, "repeats": -1},
    )


def unschedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name="resume stale evals").delete()


class Migration(migrations.Migration):
    dependencies = [("evals", "0001_initial"), ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more")]
    operations = [migrations.RunPython(schedule, unschedule)]
