from django.db import migrations

# Schedules are declared in belvedir/schedules.py and synced after every migrate;
# this migration once made them, and is kept (empty) for the migration graph.


class Migration(migrations.Migration):
    dependencies = [("evals", "0004_eval_error_status_and_auto_resumes"), ("sandbox", "0007_reaper_schedule")]
    operations = []
