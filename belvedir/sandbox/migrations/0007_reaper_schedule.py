from django.db import migrations

# Schedules are declared in belvedir/schedules.py and synced after every migrate;
# this migration once made them, and is kept (empty) for the migration graph.


class Migration(migrations.Migration):
    dependencies = [
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
        ("sandbox", "0006_sandboxhost_tls_and_health"),
    ]
    operations = []
