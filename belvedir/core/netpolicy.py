"""Where untrusted work may connect: one policy for every outbound connection
the platform makes on a user's behalf (harness egress through the proxy,
deployment endpoints, the LLM judge, harness clones).

The decision is made on the address actually connected to, after DNS
resolution: a name that resolves to a private address is refused whatever
it is called, and callers connect to the very address that was checked, so
DNS rebinding between the check and the connection changes nothing.
"""

import ipaddress
import socket
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from django.conf import settings


# Python's `is_global` already excludes RFC 1918, loopback, link-local
# (169.254.0.0/16: cloud metadata), CGNAT 100.64.0.0/10 and IANA's other
# special-purpose blocks; multicast and the reserved ranges are named too
# because `is_global` lets some of them through.
def is_public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return is_public(ip.ipv4_mapped)
    return ip.is_global and not (ip.is_multicast or ip.is_reserved or ip.is_unspecified or ip.is_link_local)


def parse_ip(text: str):
    return ipaddress.ip_address(text.split("%", 1)[0])


@dataclass(frozen=True)
class Origin:
    host: str
    port: int

    @classmethod
    def from_url(cls, url: str) -> "Origin":
        parts = urlsplit(url)
        return cls(parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80))


class Refused(Exception):
    """A destination the policy does not allow; the message says why, never echoing a body."""


@dataclass(frozen=True)
class Policy:
    # None: any port.
    ports: frozenset[int] | None = frozenset({80, 443})
    # Exactly these (host, port) pairs are allowed whatever address they resolve
    # to: the platform origin, so FRACTAL_BASE_URL and ADAPTER_URL work even when
    # the platform runs on a private address.
    origins: tuple[Origin, ...] = ()
    # Operator-allowed networks (any port): a private model server, a test host.
    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()
    # Private addresses allowed (development: a local vLLM).
    allow_private: bool = False
    # When set, only these domains (and their subdomains) plus the origins.
    domains: tuple[str, ...] | None = field(default=None)

    def check_name(self, host: str, port: int):
        """Refuse by name before resolving: the domain allowlist."""
        host = host.lower().rstrip(".")
        if self.is_origin(host, port) or self.domains is None:
            return
        if not any(host == d or host.endswith("." + d) for d in self.domains):
            raise Refused(f"{host} is not in this harness's egress allowlist.")

    def is_origin(self, host: str, port: int) -> bool:
        return Origin(host.lower().rstrip("."), port) in self.origins

    def check_address(self, host: str, ip, port: int):
        if self.is_origin(host, port) or any(ip in net for net in self.networks):
            return
        if not (is_public(ip) or self.allow_private):
            raise Refused(f"{host} resolves to {ip}, a private or special-purpose address.")
        if self.ports is not None and port not in self.ports:
            raise Refused(f"Port {port} is not an allowed egress port ({', '.join(map(str, sorted(self.ports)))}).")

    def resolve(self, host: str, port: int) -> list[str]:
        """The addresses to connect to, every one of them checked; Refused otherwise."""
        self.check_name(host, port)
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError):
            raise Refused(f"{host} does not resolve.") from None
        # IPv4 first: callers connect to the first address, and a server
        # bound to 127.0.0.1 or 0.0.0.0 is not listening on ::1.
        addresses = sorted(dict.fromkeys(info[4][0] for info in infos), key=lambda a: ":" in a)
        # Every answer must pass: a name answering one public and one private
        # address is refused rather than tried address by address.
        for address in addresses:
            self.check_address(host, parse_ip(address), port)
        return addresses


def platform_origins() -> tuple[Origin, ...]:
    return (Origin.from_url(settings.BELVEDIR_BASE_URL),)


def is_origin_url(url: str) -> bool:
    """Whether a URL points at the platform itself (BELVEDIR_BASE_URL's host and port)."""
    return Origin.from_url(url) in platform_origins()


def egress_policy(domains=None) -> Policy:
    """Harness sandboxes: the public internet on the egress ports, the platform, and its local model server.

    The local model (BELVEDIR_LOCAL_MODEL_URL) is a platform service like the
    platform itself, usually on loopback: an agent harness pointed at it
    (LLM_BASE_URL) reaches exactly that origin, as it reaches FRACTAL_BASE_URL.
    """
    return Policy(
        ports=frozenset(settings.EGRESS_PORTS),
        origins=(*platform_origins(), Origin.from_url(settings.LOCAL_MODEL_URL)),
        networks=settings.EGRESS_ALLOW_NETWORKS,
        domains=tuple(domains) if domains else None,
    )


def outbound_policy() -> Policy:
    """The platform's own calls for a user (deployments, judge, clones): any port, public addresses."""
    return Policy(
        ports=None,
        networks=settings.EGRESS_ALLOW_NETWORKS,
        allow_private=settings.EVAL_ALLOW_PRIVATE_URLS,
    )
