from django.db import migrations, models


def summarise(apps, schema_editor):
    """Tasks imported before the field: their environment read from their stored files, as an import now does."""
    from agent_tasks.archive import unpack
    from agent_tasks.environment import summary

    AgentTask = apps.get_model("agent_tasks", "AgentTask")
    for task in AgentTask.objects.only("pk", "archive").iterator(chunk_size=50):
        AgentTask.objects.filter(pk=task.pk).update(environment=summary(unpack(bytes(task.archive), ("environment/",))))


class Migration(migrations.Migration):
    dependencies = [
        ("agent_tasks", "0003_jobs"),
    ]

    operations = [
        migrations.AddField(
            model_name="agenttask",
            name="environment",
            field=models.JSONField(
                default=dict,
                help_text="How its Dockerfile is built here, read at import: the image named and what stands in for it, build steps, or why it cannot be.",
            ),
        ),
        migrations.RunPython(summarise, migrations.RunPython.noop),
    ]
