"""Every stored scorer in its one shape, {"name": ..., "options": {...}}: a bare name and the llm_judge scorer's
deployment (which is the eval's judge, Eval.judge, already) were the shapes before."""

from django.db import migrations

# Each scorer's options with their defaults, as evals.scoring's scorers filled them when this migration was written
# (an eval stores every option, so two evals with the same scorers compare equal).
DEFAULTS = {
    "exact_match": {"expected": ""},
    "contains": {"expected": ""},
    "last_number": {"expected": ""},
    "regex": {"pattern": "", "expected": ""},
    "json_valid": {},
    "llm_judge": {"prompt": "", "scale": "pass_fail", "max_tokens": 1024},
}


def one_shape(entry) -> dict:
    name = entry if isinstance(entry, str) else entry["name"]
    given = {} if isinstance(entry, str) else entry.get("options", {})
    return {"name": name, "options": {**DEFAULTS.get(name, {}), **given}}


def forwards(apps, schema_editor):
    Eval = apps.get_model("evals", "Eval")
    for ev in Eval.objects.exclude(scorers=[]).only("pk", "scorers").iterator():
        Eval.objects.filter(pk=ev.pk).update(scorers=[one_shape(entry) for entry in ev.scorers])


def backwards(apps, schema_editor):
    Eval = apps.get_model("evals", "Eval")
    for ev in Eval.objects.exclude(scorers=[]).only("pk", "scorers", "judge_id").iterator():
        old = [
            {"name": e["name"], "deployment": ev.judge_id}
            if e["name"] == "llm_judge"
            else ({"name": "regex", "options": {"pattern": e["options"]["pattern"]}} if e["name"] == "regex" else e["name"])
            for e in ev.scorers
        ]
        Eval.objects.filter(pk=ev.pk).update(scorers=old)


class Migration(migrations.Migration):
    dependencies = [("evals", "0013_dataset_versions")]

    operations = [migrations.RunPython(forwards, backwards)]
