import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("harnesses", "0008_reaper_moves_to_sandbox"), ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more")]

    operations = [
        migrations.AddField(model_name="run", name="queued_at", field=models.DateTimeField(default=django.utils.timezone.now)),
    ]
