import re
from urllib.parse import urlparse

from django.conf import settings
from django.core.exceptions import ValidationError

from belvedir.sandbox import egress

from .drivers import is_platform_driver_url

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
SCP_LIKE = re.compile(r"[\w.-]+@[\w.-]+:[\w./~-]+\Z")  # git@github.com:org/repo.git
# Set by the platform for every run; a harness cannot override them.
RESERVED_ENV_NAMES = {
    "FRACTAL_API_KEY",
    "FRACTAL_BASE_URL",
    "FRACTAL_RUN_ID",
    "FRACTAL_TASKS_FILE",
    "BELVEDIR_API_KEY",
    "BELVEDIR_BASE_URL",
    "BELVEDIR_RUN_ID",
    "HOME",
    "PATH",
} | egress.RESERVED_ENV
DOMAIN = re.compile(r"(?=.{1,253}\Z)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}\Z")


def validate_repo_url(value: str):
    value = value.strip()
    if SCP_LIKE.match(value):
        return
    if is_platform_driver_url(value):
        return  # the platform's own driver repos, even over plain http on a private address
    parsed = urlparse(value)
    if parsed.scheme in {"https", "ssh"}:
        if not parsed.netloc or not parsed.path.strip("/"):
            raise ValidationError("Give the full repository URL, e.g. https://github.com/org/repo.git.")
        return
    if parsed.scheme == "file" or (not parsed.scheme and value.startswith("/")):
        if not settings.HARNESS_ALLOW_LOCAL_REPOS:
            raise ValidationError("Local paths and file:// URLs are disabled on this server; use an https or ssh URL.")
        return
    if parsed.scheme == "http":
        raise ValidationError("Use https:// (plain http is not accepted for repositories).")
    raise ValidationError("Enter an https or ssh git URL, e.g. https://github.com/org/repo.git or git@github.com:org/repo.git.")


def validate_env_name(name: str):
    if not ENV_NAME.match(name):
        raise ValidationError(f"{name!r} is not a valid variable name (letters, digits and _, not starting with a digit).")
    if name in RESERVED_ENV_NAMES:
        raise ValidationError(f"{name} is set by the platform for every run.")


def validate_command(value: str):
    if not value.strip():
        raise ValidationError("A command is required.")


def validate_ref(value: str):
    if value and (value.startswith("-") or any(c.isspace() for c in value) or ".." in value):
        raise ValidationError("Not a valid branch, tag or commit.")


def validate_egress_domains(value: str):
    for line in value.splitlines():
        domain = line.strip().lower().rstrip(".")
        if domain and not DOMAIN.match(domain):
            raise ValidationError(f"{line.strip()!r} is not a domain name (one per line, e.g. api.anthropic.com).")
