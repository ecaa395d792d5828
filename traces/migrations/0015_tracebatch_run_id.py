"""A batch keeps the run whose key sent it, found once by the request, so the worker does not look it up again."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("traces", "0014_taskgroup_canary"),
    ]

    operations = [
        migrations.AddField(model_name="tracebatch", name="run_id", field=models.BigIntegerField(blank=True, null=True)),
    ]
