from django.db import migrations

# The sandbox app's "reap sandbox workloads" (belvedir.sandbox.reaper.reap)
# now ends stale runs through the run owner kind, with every other kind's.


def unschedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name="reap harness runs").delete()


def schedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.update_or_create(
        name="reap harness runs",
        defaults={"func": "harnesses.tasks.reap_runs", "schedule_type": "I", "minutes": 1, "repeats": -1},
    )


class Migration(migrations.Migration):
    dependencies = [("harnesses", "0007_admin_action_permissions"), ("sandbox", "0007_reaper_schedule")]
    operations = [migrations.RunPython(unschedule, schedule)]
