from django.apps import AppConfig


class HarnessesConfig(AppConfig):
    name = "harnesses"
    verbose_name = "Harnesses and runs"

    def ready(self):
        from billing import workloads
        from traces import workload_keys

        from .actions import RUNS
        from .models import Run
        from .redaction import redact_run_rows

        # Charged, ended, reaped and refunded as every paid workload is; a sandbox owner kind through it.
        workloads.register(RUNS)
        # Trace ingest's questions about runs: traces imports nothing from this app.
        workload_keys.register(
            "run",
            prefix="",
            field="run",
            of_key=lambda key_id: Run.objects.filter(api_key_id=key_id).values_list("pk", flat=True).first(),
            redact=redact_run_rows,
        )
