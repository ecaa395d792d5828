from django.apps import AppConfig


class SandboxConfig(AppConfig):
    name = "belvedir.sandbox"
    label = "sandbox"
    verbose_name = "Sandbox hosts"

    def ready(self):
        from . import checks  # noqa: F401  (registers the system checks)
