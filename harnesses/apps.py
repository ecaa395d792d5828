from django.apps import AppConfig


class HarnessesConfig(AppConfig):
    name = "harnesses"
    verbose_name = "Harnesses and runs"

    def ready(self):
        from belvedir.sandbox import health

        from .actions import end_runs_on_lost_host

        health.on_host_lost("run", end_runs_on_lost_host)
