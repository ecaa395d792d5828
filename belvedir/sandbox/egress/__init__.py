"""Harness egress: the only way out of a sandbox on the `egress` network.

The sandbox itself has network none. A directory holding the host's egress
proxy socket is mounted into it, and a forwarder (forwarder.py, run under a
uid the workload cannot signal) relays 127.0.0.1:3128 inside the sandbox to
that socket. The proxy (proxy.py, run by `manage.py egress_proxy`, one per
sandbox host) authenticates each connection by the workload's grant, applies
belvedir/core/netpolicy.py on the address it connects to, counts bytes per
destination and enforces the grant's byte cap; its connection handler
(handler.py) bounds what one plain-HTTP request may make it hold.
"""

import base64
import hashlib
import secrets
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from ..models import EgressGrant
from ..owners import Owner

NETWORK = "egress"
SOCKET_NAME = "proxy.sock"
# Where the socket directory appears inside a sandbox, and where the forwarder listens.
MOUNT_DIR = "/run/belvedir-egress"
FORWARD_PORT = 3128
# PID 1, the keep-alive and the forwarder run as this uid; the workload runs
# as 1000 and, without CAP_KILL, cannot signal them.
KEEPER_USER = "999:999"
CA_BUNDLE = "/tmp/.belvedir-ca/ca-bundle.pem"
IMAGE_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


def socket_path() -> Path:
    return Path(settings.EGRESS_SOCKET_DIR) / SOCKET_NAME


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def issue_grant(owner: Owner, *, domains=(), max_bytes=None) -> tuple[EgressGrant, str]:
    """A fresh grant for the owner (a re-delivered task replaces its old one); the token is returned once."""
    token = secrets.token_urlsafe(32)
    with transaction.atomic():
        # Locked before anything is deleted: the proxy's recorder may be adding a
        # destination row for the old grant, and its foreign key check then waits
        # for this commit and fails there (dropping those counts), instead of
        # committing a row that this delete has already passed over.
        old = EgressGrant.objects.for_owner(owner).select_for_update()
        if old:
            old.delete()
        grant = EgressGrant.objects.create(
            owner_kind=owner.kind,
            owner_id=owner.id,
            token_hash=hash_token(token),
            domains=list(domains),
            max_bytes=max_bytes or settings.EGRESS_MAX_BYTES,
        )
    return grant, token


def revoke_grant(owner: Owner):
    EgressGrant.objects.for_owner(owner).filter(revoked_at__isnull=True).update(revoked_at=timezone.now())


def proxy_url(owner: Owner, token: str) -> str:
    # The user name is only for the proxy's logs: the token alone authenticates.
    return f"http://{owner.kind}-{owner.id}:{token}@127.0.0.1:{FORWARD_PORT}"


def sandbox_env(proxy: str) -> dict[str, str]:
    """What makes ordinary clients use the proxy and trust the merged CA bundle.

    NO_PROXY is set empty on purpose: a user's own value must not let the
    platform URL (or anything else) bypass the proxy. With network none a
    bypass would only fail, but it would fail confusingly.
    """
    env = {}
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        env[name] = env[name.lower()] = proxy
    env["NO_PROXY"] = env["no_proxy"] = ""
    for name in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT", "GIT_SSL_CAINFO", "NODE_EXTRA_CA_CERTS"):
        env[name] = CA_BUNDLE
    return env


RESERVED_ENV = frozenset(sandbox_env("x"))


def operator_ca() -> bytes:
    path = settings.EGRESS_EXTRA_CA_FILE
    return Path(path).read_bytes() if path else b""


def decode_proxy_authorization(header: bytes | None) -> str | None:
    """The token from `Proxy-Authorization: Basic base64(user:token)`, or None."""
    if not header:
        return None
    scheme, _, value = header.partition(b" ")
    if scheme.lower() != b"basic":
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode()
    except (ValueError, UnicodeDecodeError):
        return None
    return decoded.partition(":")[2] or None
