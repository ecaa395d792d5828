from django.conf import settings
from django.db import models
from django.utils import timezone

from .engine import Engine
from .owners import Owner


class Runtime(models.TextChoices):
    AUTO = "auto", "Auto (runsc when available)"
    RUNSC = "runsc", "gVisor (runsc)"
    RUNC = "runc", "runc"


class ComputeType(models.TextChoices):
    """What a workload needs and a host offers; harnesses, runs and hosts share it."""

    CPU = "cpu", "CPU"
    GPU = "gpu", "GPU"


def backend_choices():
    """Docker; the fake backend too where settings allow it (tests: belvedir/sandbox/backends/fake.py)."""
    choices = [("docker", "Docker")]
    if settings.SANDBOX_ALLOW_FAKE_BACKEND:
        choices.append(("fake", "Fake: plain processes on the worker, unsandboxed (tests only)"))
    return choices


def default_backend():
    return settings.SANDBOX_DEFAULT_BACKEND


class SandboxHost(models.Model):
    name = models.CharField(max_length=100, unique=True)
    # Which code runs its sandboxes (belvedir/sandbox/backend.py); belvedir/sandbox/backends/ holds them.
    backend = models.CharField(max_length=20, choices=backend_choices, default=default_backend)
    url = models.CharField(
        "URL", max_length=255, help_text="The engine's address, as its backend reads it: for Docker, unix:///var/run/docker.sock or tcp://host:2376."
    )
    # A remote engine (dockerd --tlsverify) takes a client certificate signed
    # by a CA it trusts. Each field: a PEM, or the path of a PEM file on the workers.
    tls_ca = models.TextField("TLS CA certificate", blank=True, help_text="PEM or path. The CA that signed the engine's certificate.")
    tls_cert = models.TextField("TLS client certificate", blank=True, help_text="PEM or path.")
    tls_key = models.TextField("TLS client key", blank=True, help_text="PEM or path. A secret: never shown again.")
    kind = models.CharField(max_length=3, choices=ComputeType.choices, default=ComputeType.CPU)
    gpu_type = models.CharField(max_length=40, default="A10G", blank=True)
    gpu_count = models.PositiveIntegerField(default=0, help_text="GPUs on a GPU host, tracked as slots 0..n-1.")
    gpu_device_requests = models.BooleanField(
        default=True, help_text="Give GPU sandboxes a Docker device request. Off only to test GPU harnesses on a CPU engine."
    )
    capacity = models.PositiveIntegerField(default=4, help_text="Sandboxes this host runs at once.")
    runtime = models.CharField(
        max_length=10,
        choices=Runtime.choices,
        default=Runtime.AUTO,
        help_text="Container runtime for untrusted work. Auto: gVisor (runsc) when the engine has it, else runc.",
    )
    enabled = models.BooleanField(default=True)
    draining = models.BooleanField(default=False, help_text="Finish running sandboxes, take no new ones.")
    healthy = models.BooleanField(default=True, help_text="Answered its last health check. An unhealthy host takes no new sandboxes.")
    last_checked_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        permissions = [("drain_sandboxhost", "Can drain sandbox hosts")]

    def __str__(self):
        return f"{self.name} ({self.kind})"

    @property
    def accepting(self):
        return self.enabled and not self.draining and self.healthy

    @property
    def engine(self) -> Engine:
        return Engine(self.url, ca=self.tls_ca, cert=self.tls_cert, key=self.tls_key)


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
    return {"url": settings.SANDBOX_DOCKER_URL, "kind": ComputeType.CPU, "capacity": 4}


class EgressGrantQuerySet(models.QuerySet):
    def for_owner(self, owner: Owner):
        return self.filter(owner_kind=owner.kind, owner_id=owner.id)


class EgressGrant(models.Model):
    """A workload's right to leave its sandbox through the egress proxy.

    The proxy authenticates each connection by the grant's token (the
    password in the sandbox's HTTP_PROXY URL; only its hash is stored),
    applies the grant's domain allowlist and byte cap, and adds up what
    went where in `destinations`. Revoked when the workload ends.
    """

    owner_kind = models.CharField(max_length=20)
    owner_id = models.CharField(max_length=40)
    token_hash = models.CharField(max_length=64, unique=True)
    domains = models.JSONField(default=list, blank=True, help_text="Empty: the whole public internet.")
    max_bytes = models.BigIntegerField()
    bytes_up = models.BigIntegerField(default=0)
    bytes_down = models.BigIntegerField(default=0)
    cap_reached_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = EgressGrantQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["owner_kind", "owner_id"], name="one_egress_grant_per_owner")]

    def __str__(self):
        return f"egress of {self.owner_kind} {self.owner_id}"

    @property
    def owner(self) -> Owner:
        return Owner(self.owner_kind, self.owner_id)

    @property
    def total_bytes(self):
        return self.bytes_up + self.bytes_down


class EgressDestination(models.Model):
    """One destination a workload asked for: allowed (reason empty) or denied, with counts."""

    grant = models.ForeignKey(EgressGrant, on_delete=models.CASCADE, related_name="destinations")
    host = models.CharField(max_length=255)
    port = models.PositiveIntegerField()
    reason = models.CharField(max_length=300, blank=True, help_text="Why it was denied; empty when allowed.")
    requests = models.PositiveIntegerField(default=0)
    bytes_up = models.BigIntegerField(default=0)
    bytes_down = models.BigIntegerField(default=0)
    last_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["reason", "-bytes_down", "host"]
        constraints = [models.UniqueConstraint(fields=["grant", "host", "port", "reason"], name="one_row_per_destination_verdict")]

    def __str__(self):
        return f"{self.host}:{self.port}"

    @property
    def allowed(self) -> bool:
        return not self.reason
