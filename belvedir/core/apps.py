from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "belvedir.core"
    label = "core"
    verbose_name = "Accounts, projects and API keys"

    def ready(self):
        from . import checks  # noqa: F401  (registers the system checks)
