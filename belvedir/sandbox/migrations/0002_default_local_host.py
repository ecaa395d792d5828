from django.conf import settings
from django.db import migrations


def create_local_host(apps, schema_editor):
    SandboxHost = apps.get_model("sandbox", "SandboxHost")
    if not SandboxHost.objects.exists():
        # DOCKER_HOST when set, else the local socket (settings.SANDBOX_DOCKER_URL).
        SandboxHost.objects.create(name="local", docker_url=settings.SANDBOX_DOCKER_URL, kind="cpu", capacity=4)


class Migration(migrations.Migration):
    dependencies = [("sandbox", "0001_initial")]
    operations = [migrations.RunPython(create_local_host, migrations.RunPython.noop)]
