from django.db import migrations

# resume_stale_evals is now the eval owner kind's reap_stale, called by the
# sandbox app's "reap sandbox workloads", which also frees what the eval held.


def unschedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name="resume stale evals").delete()


def schedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.update_or_create(
        name="resume stale evals",
        defaults={"func": "evals.tasks.resume_stale_evals", "schedule_type": "I", "minutes": 1, "repeats": -1},
    )


class Migration(migrations.Migration):
    dependencies = [("evals", "0004_eval_error_status_and_auto_resumes"), ("sandbox", "0007_reaper_schedule")]
    operations = [migrations.RunPython(unschedule, schedule)]
