"""The Terminal-Bench preset names what it is, the 0.2 harness, and points Terminal-Bench 2 to jobs.

Terminal-Bench 2 ships only in Harbor's task format: its tasks are imported on the Tasks page (or with
`bv tasks import`) and run as a job, each trial sandboxed, the export checking its submission rules. The 0.2
harness stays for git-repo harnesses.
"""

from django.db import migrations

OLD = (
    "Terminal-Bench",
    "Hard tasks done in a real shell: compiling, debugging, data wrangling. Score: fraction of tasks whose checks pass.",
)
NEW = (
    "Terminal-Bench 0.2 (harness)",
    "Terminal-Bench 0.2's tasks through its own `tb` runner in one harness run (it needs a Docker engine of its own). "
    "Terminal-Bench 2 ships in Harbor's task format: import its tasks on the Tasks page and run them as a job, each "
    "trial in its own sandbox, 5 attempts each, exported with its submission rules checked.",
)


def rename(to):
    def apply(apps, schema_editor):
        apps.get_model("harnesses", "Preset").objects.filter(slug="terminal-bench").update(name=to[0], description=to[1])

    return apply


class Migration(migrations.Migration):
    dependencies = [("harnesses", "0012_local_model")]

    operations = [migrations.RunPython(rename(NEW), rename(OLD))]
