"""Harnesses can have the local model mounted; the catalog gets the preset that benchmarks an adapter with it on CPU."""

from django.db import migrations, models

PRESET = {
    "slug": "local-model",
    "name": "Local model + adapter (CPU)",
    "description": "Benchmarks a fine-tuned LoRA adapter (GGUF) of the platform's local model on CPU: base and adapter served side by side "
    "in the sandbox, each scored on the multiple-choice questions given as Tasks. Score: the adapter's accuracy.",
    "repo_url": "{drivers}/local-model.git",
    "install_command": "python3 -m py_compile run.py belvedir_driver.py",
    "run_command": "python3 run.py",
    "compute_type": "cpu",
    "gpu_type": "",
    "env_var_names": [],
    "needs_tasks": True,
    "local_model": True,
    "ref": "",
}


def seed(apps, schema_editor):
    Preset = apps.get_model("harnesses", "Preset")
    position = (Preset.objects.aggregate(models.Max("position"))["position__max"] or 0) + 1
    Preset.objects.update_or_create(slug=PRESET["slug"], defaults={**PRESET, "position": position})


class Migration(migrations.Migration):
    dependencies = [("harnesses", "0011_run_secret_places")]
    operations = [
        migrations.AddField(
            model_name="preset",
            name="local_model",
            field=models.BooleanField(default=False, help_text="Harnesses made from it get the local model, read-only (Harness.local_model)."),
        ),
        migrations.AddField(
            model_name="harness",
            name="local_model",
            field=models.BooleanField(
                default=False,
                help_text="Mount the platform's local model (SmolLM2-135M) and its runtime read-only at /opt/belvedir, to serve it, with a fine-tuned adapter, inside the sandbox on CPU (drivers/local-model).",
                verbose_name="Local model",
            ),
        ),
        migrations.RunPython(seed, migrations.RunPython.noop),
    ]
