from django.core.management.base import BaseCommand

from harnesses.tasks import reap_runs


class Command(BaseCommand):
    help = "Finish runs whose worker died (refunded) and remove orphan sandbox containers. Run before starting workers."

    def handle(self, *args, **options):
        outcome = reap_runs()
        self.stdout.write(f"Reaped {outcome['reaped']} run(s), removed {outcome['orphans_removed']} orphan container(s).")
