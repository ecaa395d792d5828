import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("evals", "0005_stale_evals_go_through_the_sandbox_reaper"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [
        migrations.AddField(model_name="eval", name="queued_at", field=models.DateTimeField(default=django.utils.timezone.now)),
    ]
