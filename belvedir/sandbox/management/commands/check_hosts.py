from django.core.management.base import BaseCommand

from belvedir.sandbox.health import check_hosts


class Command(BaseCommand):
    help = "Health-check every enabled sandbox host now (the schedule does it every minute)."

    def handle(self, *args, **options):
        result = check_hosts()
        for name in result["healthy"]:
            self.stdout.write(f"{name}: healthy")
        for name in result["unhealthy"]:
            self.stdout.write(f"{name}: UNHEALTHY")
