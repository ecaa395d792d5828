from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.checks import Error, Tags, Warning, register
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError


@register(Tags.compatibility)
def check_configuration(app_configs, **kwargs):
    errors = [Error(message, hint="See docs/running/configuration.md.", id="belvedir.E001") for message in settings.CONFIG_ERRORS]
    try:
        settings.SECRET_KEY  # noqa: B018  (reading it is the check: it raises when unset)
    except ImproperlyConfigured:
        errors.append(
            Error(
                "SECRET_KEY is not set and DEBUG is off.",
                hint="Set SECRET_KEY to a long random string (it is generated under var/ only when DEBUG=1).",
                id="belvedir.E002",
            )
        )
    if not settings.SANDBOX_IMAGE:
        errors.append(Error("BELVEDIR_SANDBOX_IMAGE is empty.", id="belvedir.E004"))
    for name, network in (("BELVEDIR_SANDBOX_NETWORK", settings.SANDBOX_NETWORK), ("BELVEDIR_HARNESS_NETWORK", settings.HARNESS_SANDBOX_NETWORK)):
        if network in {"bridge", "default"}:
            errors.append(
                Warning(
                    f"{name}={network!r} lets sandboxes reach private addresses.",
                    hint="Use 'egress' (the policy proxy) or 'none'.",
                    id="belvedir.W001",
                )
            )
    if settings.HARNESS_SANDBOX_NETWORK == "host" and not settings.DEBUG:
        errors.append(
            Error(
                "BELVEDIR_HARNESS_NETWORK='host' puts untrusted harnesses on the worker's network "
                "(its database, Redis, the Docker API, cloud metadata, the LAN).",
                hint="Use 'egress' (the default): the platform and the public internet through the policy proxy.",
                id="belvedir.E005",
            )
        )
    return errors


@register(Tags.security)
def check_email_shaped_usernames(app_configs, **kwargs):
    """Accounts named like an email address, from before usernames refused @.

    Invitations by address now go to the email's owner alone, but such a name
    still reads as someone else's address on member lists: rename them.
    """
    try:
        names = list(get_user_model().objects.filter(username__contains="@").order_by("pk").values_list("username", flat=True)[:6])
    except (DatabaseError, RuntimeError):
        return []
    if not names:
        return []
    shown = ", ".join(repr(name) for name in names[:5]) + (", …" if len(names) > 5 else "")
    return [
        Warning(
            f"Accounts with an email address for a username: {shown}.",
            hint="Rename them in the admin (Users): usernames no longer take @, and an email-shaped name looks like another person's address.",
            id="belvedir.W004",
        )
    ]
