from django.apps import AppConfig


class HarnessesConfig(AppConfig):
    name = "harnesses"
    verbose_name = "Harnesses and runs"

    def ready(self):
        from belvedir.sandbox import owners
        from traces import workload_keys

        from .actions import end_runs_on_lost_host
        from .models import Run
        from .redaction import redact_run_rows
        from .tasks import reap_stale_runs

        owners.register("run", active=Run.objects.active, reap_stale=reap_stale_runs, host_lost=end_runs_on_lost_host)
        # Trace ingest's questions about runs: traces imports nothing from this app.
        workload_keys.register(
            "run",
            prefix="",
            field="run",
            of_key=lambda key_id: Run.objects.filter(api_key_id=key_id).values_list("pk", flat=True).first(),
            redact=redact_run_rows,
        )
