from django.apps import AppConfig
from django.db.models.signals import post_migrate


class CoreConfig(AppConfig):
    name = "belvedir.core"
    label = "core"
    verbose_name = "Accounts, projects and API keys"

    def ready(self):
        from belvedir import schedules

        from . import checks  # noqa: F401  (registers the system checks)

        # post_migrate is sent once per app after the whole migrate: syncing on core's alone runs it once.
        post_migrate.connect(schedules.sync, sender=self, dispatch_uid="belvedir.schedules.sync")
