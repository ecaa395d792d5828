from django.core.management.base import BaseCommand

from belvedir.sandbox.reaper import reap


class Command(BaseCommand):
    help = (
        "End workloads whose worker died (runs refunded, evals resumed), release their leases and remove "
        "orphan sandbox containers. Run before starting workers."
    )

    def handle(self, *args, **options):
        outcome = reap()
        reaped = ", ".join(f"{n} {kind}(s)" for kind, n in outcome["reaped"].items()) or "nothing"
        self.stdout.write(f"Reaped {reaped}, released {outcome['leases_released']} lease(s), removed {outcome['orphans_removed']} orphan container(s).")
