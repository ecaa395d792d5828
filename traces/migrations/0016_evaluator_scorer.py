"""An evaluator's kind and config become one scorer configuration, {"name": ..., "options": {...}}, as evals' scorers are:
a code check's name is its check, a judge is llm_judge, a trajectory check is trajectory."""

from django.db import migrations, models

# The options each check reads, by kind; the rest of the old config was the check's name.
OPTIONS = {"code": ("expected", "pattern"), "judge": ("prompt", "scale"), "trajectory": ("max_steps", "max_tool_errors", "max_cost")}


def forwards(apps, schema_editor):
    Evaluator = apps.get_model("traces", "Evaluator")
    for evaluator in Evaluator.objects.all().iterator():
        config = evaluator.config or {}
        name = {"code": config.get("check"), "judge": "llm_judge", "trajectory": "trajectory"}[evaluator.kind]
        options = {k: config[k] for k in OPTIONS[evaluator.kind] if k in config and (k != "pattern" or name == "regex")}
        if name in ("json_valid",):
            options = {}
        if name == "regex" or name in ("exact_match", "contains", "last_number"):
            options = {"pattern": "", "expected": "", **options} if name == "regex" else {"expected": "", **options}
        if name == "llm_judge":
            options = {"prompt": "", "scale": "pass_fail", "max_tokens": 1024, **options}
        Evaluator.objects.filter(pk=evaluator.pk).update(scorer={"name": name, "options": options})


def backwards(apps, schema_editor):
    Evaluator = apps.get_model("traces", "Evaluator")
    for evaluator in Evaluator.objects.all().iterator():
        name, options = evaluator.scorer["name"], evaluator.scorer["options"]
        kind = {"llm_judge": "judge", "trajectory": "trajectory"}.get(name, "code")
        config = {k: v for k, v in options.items() if k in OPTIONS[kind] and v != ""}
        if kind == "code":
            config["check"] = name
        Evaluator.objects.filter(pk=evaluator.pk).update(kind=kind, config=config)


class Migration(migrations.Migration):
    dependencies = [("traces", "0015_tracebatch_run_id")]

    operations = [
        migrations.AddField(model_name="evaluator", name="scorer", field=models.JSONField(default=dict)),
        migrations.RunPython(forwards, backwards),
        # A default, so that undoing the removal below can add the column back to existing rows (backwards fills it).
        migrations.AlterField(model_name="evaluator", name="kind", field=models.CharField(max_length=12, default="code")),
        migrations.RemoveField(model_name="evaluator", name="kind"),
        migrations.RemoveField(model_name="evaluator", name="config"),
    ]
