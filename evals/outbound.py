"""The platform's HTTP calls for users (deployments, the LLM judge, Test
connection) go only where the outbound policy allows, decided on the address
actually connected to.

aiohttp resolves names through `PolicyResolver`, which returns only checked
addresses, so the connection goes to the very address the policy saw: a DNS
answer that changes after a deployment was saved (rebinding) changes nothing.
aiohttp skips resolvers for IP literals, so `check_literal` covers those.
Redirects are never followed (callers pass allow_redirects=False).
"""

import asyncio
import errno
import ipaddress
import socket

from aiohttp.abc import AbstractResolver
from yarl import URL

from belvedir.core.netpolicy import Policy, Refused, is_public, outbound_policy, parse_ip


class RefusedConnection(OSError):
    """Raised under aiohttp, which wraps it in ClientConnectorError (`os_error`)."""

    def __init__(self, reason: str):
        super().__init__(errno.EACCES, reason)


class PolicyResolver(AbstractResolver):
    def __init__(self, policy: Policy | None = None):
        self.policy = policy or outbound_policy()

    async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET):
        try:
            # getaddrinfo blocks: off the event loop.
            addresses = await asyncio.get_running_loop().run_in_executor(None, self.policy.resolve, host, port)
        except Refused as exc:
            raise RefusedConnection(str(exc)) from None
        return [
            {
                "hostname": host,
                "host": address,
                "port": port,
                "family": socket.AF_INET6 if ":" in address else socket.AF_INET,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
            }
            for address in addresses
        ]

    async def close(self):
        pass


def check_literal(url: str, policy: Policy):
    """Refused for a URL whose host is an IP address the policy refuses."""
    parsed = URL(url)
    try:
        ip = ipaddress.ip_address((parsed.host or "").strip("[]"))
    except ValueError:
        return  # a name: PolicyResolver decides when connecting
    policy.check_address(parsed.host, ip, parsed.port or (443 if parsed.scheme == "https" else 80))


def peer_is_public(response) -> bool:
    """Whether the response came from a public address (its body may be shown)."""
    try:
        peer = response.connection.transport.get_extra_info("peername")
        return is_public(parse_ip(peer[0]))
    except (AttributeError, TypeError, ValueError, IndexError):
        return False
