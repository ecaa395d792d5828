import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agent_tasks", "0004_task_environment"),
        ("core", "0008_api_key_read_scope"),
    ]

    operations = [
        migrations.AddField(
            model_name="trial",
            name="api_key",
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+", to="core.apikey"),
        ),
        migrations.AddField(
            model_name="trial",
            name="secret_values",
            field=models.JSONField(blank=True, default=list, editable=False),
        ),
    ]
