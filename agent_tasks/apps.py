from django.apps import AppConfig


class AgentTasksConfig(AppConfig):
    name = "agent_tasks"
    verbose_name = "Agent tasks"

    def ready(self):
        from billing import workloads

        from . import trace_keys
        from .regrades import GRADES
        from .trials import TRIALS

        # Charged, ended, reaped and refunded as every paid workload is; a sandbox owner kind through it.
        workloads.register(TRIALS)
        workloads.register(GRADES)
        # Trace ingest's questions about trials' own keys: traces imports nothing from this app.
        trace_keys.register()
