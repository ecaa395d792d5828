from django.db import migrations


def schedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.update_or_create(
        name="segment quiet trace sessions",
        defaults={"func": "traces.tasks.process_sessions", "schedule_type": "I", "minutes": 1, "repeats": -1},
    )


def unschedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name="segment quiet trace sessions").delete()


class Migration(migrations.Migration):
    dependencies = [("traces", "0001_initial"), ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more")]
    operations = [migrations.RunPython(schedule, unschedule)]
