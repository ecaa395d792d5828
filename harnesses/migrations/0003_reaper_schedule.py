from django.db import migrations


def schedule(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.update_or_create(
        name="reap harness runs",
        defaults={"func": "harnesses.tasks.reap_runs", "schedule_type": "I", "minutes": 1, "repeats": -1},
    )


def unschedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name="reap harness runs").delete()


class Migration(migrations.Migration):
    dependencies = [("harnesses", "0002_seed_presets"), ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more")]
    operations = [migrations.RunPython(schedule, unschedule)]
