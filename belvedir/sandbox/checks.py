"""System checks of the sandbox hosts: what `manage.py check --deploy` warns about untrusted code's isolation."""

from django.core.checks import Tags, Warning, register
from django.db import DatabaseError

from .models import Runtime, SandboxHost


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
        hosts = list(SandboxHost.objects.filter(enabled=True, docker_url__startswith="tcp://").values_list("name", "tls_cert", "tls_key"))
    except (DatabaseError, RuntimeError):
        return []
    return [
        Warning(
            f"Sandbox host {name!r} reaches its Docker engine over TCP without a TLS client certificate.",
            hint="Run the engine with --tlsverify and give the host its CA, client certificate and key (README, Many sandbox hosts).",
            id="belvedir.W003",
        )
        for name, cert, key in hosts
        if not (cert and key)
    ]
