from urllib.parse import urlparse

from django.core.exceptions import ValidationError

from belvedir.core.netpolicy import Origin, Refused, outbound_policy


def validate_deployment_url(url: str):
    """https/http only, to an address the outbound policy allows (checked
    again on every connection: see evals/outbound.py)."""
    parsed = urlparse(url)
    if parsed.scheme not in {"http", "https"} or not parsed.hostname:
        raise ValidationError("Enter the endpoint's base URL, e.g. https://api.example.com/v1.")
    origin = Origin.from_url(url)
    try:
        outbound_policy().resolve(origin.host, origin.port)
    except Refused as exc:
        raise ValidationError(f"{exc} This server does not call private or local addresses.") from None
