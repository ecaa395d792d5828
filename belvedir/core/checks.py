from urllib.parse import urlparse

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.checks import Error, Tags, Warning, register


@register(Tags.compatibility)
def check_configuration(app_configs, **kwargs):
    errors = [
        Error(message, hint="See README.md, section Configuration.", id="belvedir.E001")
        for message in settings.CONFIG_ERRORS
    ]
    try:
        settings.SECRET_KEY
    except ImproperlyConfigured:
        errors.append(
            Error(
                "SECRET_KEY is not set and DEBUG is off.",
                hint="Set SECRET_KEY to a long random string (it is generated under var/ only when DEBUG=1).",
                id="belvedir.E002",
            )
        )
    if urlparse(settings.SANDBOX_DOCKER_URL).scheme not in {"unix", "tcp", "ssh", "http", "https"}:
        errors.append(
            Error(
                f"DOCKER_HOST={settings.SANDBOX_DOCKER_URL!r} is not a Docker URL.",
                hint="Use unix:///var/run/docker.sock or tcp://host:2376.",
                id="belvedir.E003",
            )
        )
    if not settings.SANDBOX_IMAGE:
        errors.append(Error("BELVEDIR_SANDBOX_IMAGE is empty.", id="belvedir.E004"))
    if settings.SANDBOX_NETWORK in {"bridge", "default"}:
        errors.append(
            Warning(
                f"BELVEDIR_SANDBOX_NETWORK={settings.SANDBOX_NETWORK!r} lets sandboxes reach private addresses.",
                hint="Use 'none', 'host' for a platform on 127.0.0.1, or a network with egress filtering.",
                id="belvedir.W001",
            )
        )
    return errors
