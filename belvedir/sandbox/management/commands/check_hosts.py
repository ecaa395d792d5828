from django.core.management.base import BaseCommand

from belvedir.sandbox.health import check_hosts
from belvedir.sandbox.models import SandboxHost


class Command(BaseCommand):
    help = "Health-check every enabled sandbox host now (the schedule does it every minute)."

    def handle(self, *args, **options):
        result = check_hosts()
        for name in result["healthy"]:
            self.stdout.write(f"{name}: healthy")
        for host in SandboxHost.objects.filter(name__in=result["unhealthy"]):
            self.stdout.write(f"{host.name}: UNHEALTHY: {host.last_error}")
