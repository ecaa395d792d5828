from django.db import migrations, models

CANARY_ENV = "BELVEDIR_CANARY_API_KEY"  # harnesses.redaction.CANARY_ENV, as it was when this was written


def canary_to_secret_places(apps, schema_editor):
    # A run whose canary was found keeps saying so, under the canary's name.
    Run = apps.get_model("harnesses", "Run")
    for run in Run.objects.filter(canary_places__gt=0).only("pk", "canary_places").iterator(chunk_size=1000):
        Run.objects.filter(pk=run.pk).update(secret_places={CANARY_ENV: run.canary_places})


def secret_places_to_canary(apps, schema_editor):
    Run = apps.get_model("harnesses", "Run")
    for run in Run.objects.exclude(secret_places={}).only("pk", "secret_places").iterator(chunk_size=1000):
        Run.objects.filter(pk=run.pk).update(canary_places=int(run.secret_places.get(CANARY_ENV, 0)))


class Migration(migrations.Migration):
    dependencies = [
        ("harnesses", "0010_run_canary_places"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="secret_places",
            field=models.JSONField(blank=True, default=dict, editable=False),
        ),
        migrations.RunPython(canary_to_secret_places, secret_places_to_canary),
        migrations.RemoveField(model_name="run", name="canary_places"),
    ]
