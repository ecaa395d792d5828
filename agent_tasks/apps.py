from django.apps import AppConfig


class AgentTasksConfig(AppConfig):
    name = "agent_tasks"
    verbose_name = "Agent tasks"

    def ready(self):
        from belvedir.sandbox import owners

        from . import trace_keys
        from .jobs import reap_stale_trials
        from .models import Trial
        from .trials import OWNER_KIND

        owners.register(OWNER_KIND, active=lambda: Trial.objects.filter(status=Trial.Status.RUNNING), reap_stale=reap_stale_trials)
        # Trace ingest's questions about trials' own keys: traces imports nothing from this app.
        trace_keys.register()
