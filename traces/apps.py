from django.apps import AppConfig
from django.core.exceptions import ImproperlyConfigured


class TracesConfig(AppConfig):
    name = "traces"
    verbose_name = "Traces"

    def ready(self):
        from . import compiled

        if stale := compiled.stale():
            # Python imports a compiled module in place of its source: the edit would not run.
            names = ", ".join(f"traces/{name}.py" for name in stale)
            raise ImproperlyConfigured(f"{names} changed after it was compiled: run `.venv/bin/python scripts/compile.py` (as `make run` and `make test` do).")
