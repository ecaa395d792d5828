from django.apps import AppConfig


class SandboxConfig(AppConfig):
    name = "belvedir.sandbox"
    label = "sandbox"
    verbose_name = "Sandbox hosts"
