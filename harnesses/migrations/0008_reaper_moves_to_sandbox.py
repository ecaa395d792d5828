from django.db import migrations

# Schedules are declared in belvedir/schedules.py and synced after every migrate;
# this migration once made them, and is kept (empty) for the migration graph.


class Migration(migrations.Migration):
    dependencies = [("harnesses", "0007_admin_action_permissions"), ("sandbox", "0007_reaper_schedule")]
    operations = []
