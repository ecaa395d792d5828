"""Each task group gets a canary GUID, written into every training export of it (issue #35).

Added empty, filled one group at a time, then made unique and required: a
field added with a default would give every existing group the same GUID.
"""

import uuid

from django.db import migrations, models


def give_each_group_its_own(apps, schema_editor):
    TaskGroup = apps.get_model("traces", "TaskGroup")
    for pk in TaskGroup.objects.filter(canary__isnull=True).values_list("pk", flat=True).iterator():
        TaskGroup.objects.filter(pk=pk).update(canary=uuid.uuid4())


class Migration(migrations.Migration):
    dependencies = [
        ("traces", "0013_evaluators"),
    ]

    operations = [
        migrations.AddField(model_name="taskgroup", name="canary", field=models.UUIDField(null=True, editable=False)),
        migrations.RunPython(give_each_group_its_own, migrations.RunPython.noop),
        migrations.AlterField(model_name="taskgroup", name="canary", field=models.UUIDField(default=uuid.uuid4, unique=True, editable=False)),
    ]
