from django.db import migrations


def schedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.update_or_create(
        name="reap sandbox workloads",
        defaults={"func": "belvedir.sandbox.reaper.reap", "schedule_type": "I", "minutes": 1, "repeats": -1},
    )


def unschedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name="reap sandbox workloads").delete()


class Migration(migrations.Migration):
    dependencies = [
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
        ("sandbox", "0006_sandboxhost_tls_and_health"),
    ]
    operations = [migrations.RunPython(schedule, unschedule)]
