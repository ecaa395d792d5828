import ipaddress
import socket
from urllib.parse import urlparse

from django.conf import settings
from django.core.exceptions import ValidationError


def validate_deployment_url(url: str):
    """https/http only; no loopback, private or link-local targets unless allowed."""
    parsed = urlparse(url)
    if parsed.scheme not in {"http", "https"} or not parsed.hostname:
        raise ValidationError("Enter the endpoint's base URL, e.g. https://api.example.com/v1.")
    if settings.EVAL_ALLOW_PRIVATE_URLS:
        return
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(parsed.hostname, parsed.port or 443, proto=socket.IPPROTO_TCP)}
    except socket.gaierror:
        raise ValidationError(f"{parsed.hostname} does not resolve.") from None
    for address in addresses:
        ip = ipaddress.ip_address(address.split("%")[0])
        if ip.is_loopback or ip.is_private or ip.is_link_local or ip.is_reserved or ip.is_unspecified:
            raise ValidationError(f"{parsed.hostname} resolves to {ip}, a private or local address, which this server does not call.")
