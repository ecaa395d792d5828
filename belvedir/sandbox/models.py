from django.conf import settings
from django.db import models
from django.utils import timezone


class SandboxHost(models.Model):
    class Kind(models.TextChoices):
        CPU = "cpu", "CPU"
        GPU = "gpu", "GPU"

    name = models.CharField(max_length=100, unique=True)
    docker_url = models.CharField(max_length=255, help_text="unix:///var/run/docker.sock or tcp://host:2376")
    kind = models.CharField(max_length=3, choices=Kind.choices, default=Kind.CPU)
    gpu_type = models.CharField(max_length=40, default="A10G", blank=True)
    gpu_count = models.PositiveIntegerField(default=0, help_text="GPUs on a GPU host, tracked as slots 0..n-1.")
    gpu_device_requests = models.BooleanField(
        default=True, help_text="Give GPU sandboxes a Docker device request. Off only to test GPU harnesses on a CPU engine."
    )
    capacity = models.PositiveIntegerField(default=4, help_text="Sandboxes this host runs at once.")
    enabled = models.BooleanField(default=True)
    draining = models.BooleanField(default=False, help_text="Finish running sandboxes, take no new ones.")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        permissions = [("drain_sandboxhost", "Can drain sandbox hosts")]

    def __str__(self):
        return f"{self.name} ({self.kind})"

    @property
    def accepting(self):
        return self.enabled and not self.draining


class SandboxLease(models.Model):
    """One running sandbox on a host: what capacity and GPU slots are counted from."""

    host = models.ForeignKey(SandboxHost, on_delete=models.PROTECT, related_name="leases")
    owner = models.CharField(max_length=100, unique=True, help_text="kind:id of the run or eval holding it")
    gpu_slot = models.PositiveIntegerField(null=True, blank=True)
    acquired_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["host", "gpu_slot"], name="one_lease_per_gpu_slot"),
        ]

    def __str__(self):
        return f"{self.owner} on {self.host.name}"


def default_host_values():
    return {"docker_url": settings.SANDBOX_DOCKER_URL, "kind": SandboxHost.Kind.CPU, "capacity": 4}
