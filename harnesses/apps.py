from django.apps import AppConfig


class HarnessesConfig(AppConfig):
    name = "harnesses"
    verbose_name = "Harnesses and runs"
