"""System checks of the sandbox hosts: the local engine's address, untrusted code's isolation, and the fake backend kept out of deployments."""

from urllib.parse import urlparse

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.db import DatabaseError

from .models import Runtime, SandboxHost, backend_choices


@register(Tags.compatibility)
def check_docker_host(app_configs, **kwargs):
    """DOCKER_HOST is the `local` host's engine (created on migrate): a typo there fails every launch."""
    if urlparse(settings.SANDBOX_DOCKER_URL).scheme in {"unix", "tcp", "ssh", "http", "https"}:
        return []
    return [
        Error(
            f"DOCKER_HOST={settings.SANDBOX_DOCKER_URL!r} is not a Docker URL.",
            hint="Use unix:///var/run/docker.sock or tcp://host:2376.",
            id="belvedir.E003",
        )
    ]


@register(Tags.security)
def check_sandbox_runtimes(app_configs, **kwargs):
    """Untrusted code under plain runc shares the host kernel's whole syscall surface."""
    try:
        hosts = list(SandboxHost.objects.filter(enabled=True, runtime=Runtime.RUNC).values_list("name", flat=True))
    except (DatabaseError, RuntimeError):
        return []  # no database to ask: not migrated yet, or a test without one
    return [
        Warning(
            f"Sandbox host {name!r} runs untrusted harnesses and completions under plain runc.",
            hint="Install gVisor (Debian's runsc), register it as the engine's `runsc` runtime, and set the host's runtime to auto or runsc.",
            id="belvedir.W002",
        )
        for name in hosts
    ]


@register(Tags.security)
def check_sandbox_host_tls(app_configs, **kwargs):
    """A Docker engine on plain TCP runs containers as root for anyone who can reach its port."""
    try:
        hosts = list(SandboxHost.objects.filter(enabled=True, url__startswith="tcp://").values_list("name", "tls_cert", "tls_key"))
    except (DatabaseError, RuntimeError):
        return []
    return [
        Warning(
            f"Sandbox host {name!r} reaches its Docker engine over TCP without a TLS client certificate.",
            hint="Run the engine with --tlsverify and give the host its CA, client certificate and key (docs/running/sandbox-hosts.md).",
            id="belvedir.W003",
        )
        for name, cert, key in hosts
        if not (cert and key)
    ]


@register(Tags.security)
def check_default_backend(app_configs, **kwargs):
    """New hosts would name a backend that every launch refuses. (A host row naming the fake where it is
    not allowed is refused at launch and shown unhealthy by its health check, as a host without the image is.)"""
    if settings.SANDBOX_DEFAULT_BACKEND in dict(backend_choices()):
        return []
    return [
        Error(
            f"SANDBOX_DEFAULT_BACKEND is {settings.SANDBOX_DEFAULT_BACKEND!r}, which this platform does not allow.",
            hint="Use docker; the fake backend is for tests (SANDBOX_ALLOW_FAKE_BACKEND).",
            id="belvedir.E006",
        )
    ]


@register(Tags.security, deploy=True)
def check_fake_backend_allowed(app_configs, **kwargs):
    """`check --deploy`: a deployment never allows the fake backend, which runs untrusted code unsandboxed."""
    if not settings.SANDBOX_ALLOW_FAKE_BACKEND:
        return []
    return [
        Error(
            "SANDBOX_ALLOW_FAKE_BACKEND is on: a sandbox host could run untrusted code as plain processes of the worker.",
            hint="Only tests turn it on (tests/conftest.py); leave it off in belvedir/settings.py.",
            id="belvedir.E007",
        )
    ]
