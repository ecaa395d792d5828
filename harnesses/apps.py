from django.apps import AppConfig


class HarnessesConfig(AppConfig):
    name = "harnesses"
    verbose_name = "Harnesses and runs"

    def ready(self):
        from belvedir.sandbox import owners

        from .actions import end_runs_on_lost_host
        from .models import Run
        from .tasks import reap_stale_runs

        owners.register("run", active=Run.objects.active, reap_stale=reap_stale_runs, host_lost=end_runs_on_lost_host)
