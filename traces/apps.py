from django.apps import AppConfig


class TracesConfig(AppConfig):
    name = "traces"
    verbose_name = "Traces"

    def ready(self):
        from . import checks  # noqa: F401  (registers the system checks)
