"""The proxy.py plugin that makes the proxy the egress policy's enforcer."""

import logging
import socket

from django.utils.encoding import force_str
from proxy.http.exception import HttpRequestRejected
from proxy.http.proxy import HttpProxyBasePlugin

from belvedir.core.netpolicy import Refused, egress_policy

from . import decode_proxy_authorization, hash_token
from .recorder import recorder

logger = logging.getLogger(__name__)


REASONS = {
    403: b"Forbidden",
    407: b"Proxy Authentication Required",
    413: b"Content Too Large",
    431: b"Request Header Fields Too Large",
}


def reject(status: int, message: str) -> HttpRequestRejected:
    """A refusal the sandbox reads: the status, and the message as a plain-text body."""
    return HttpRequestRejected(
        status_code=status,
        reason=REASONS[status],
        headers={b"Content-Type": b"text/plain", **({b"Proxy-Authenticate": b'Basic realm="belvedir egress"'} if status == 407 else {})},
        body=f"Belvedir egress: {message}\n".encode(),
    )


NO_GRANT = "this sandbox's egress credential is missing or no longer valid."


def cap_reached(grant) -> str:
    return f"the run's egress cap of {grant.max_bytes // (1024 * 1024)} MB is reached."


def grant_of(request):
    """The grant behind a request's Proxy-Authorization (read fresh), or None."""
    token = decode_proxy_authorization(request.header(b"proxy-authorization") if request.has_header(b"proxy-authorization") else None)
    return recorder().grant(hash_token(token)) if token else None


class EgressPolicyPlugin(HttpProxyBasePlugin):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.grant = None
        self.target = None  # (host, port)
        self.address = None
        self.closed = False
        self.requests = 0  # requests this connection carried
        self.early_up = 0  # bytes read after the request, before the destination was known
        # Bytes from the sandbox, tunnels included: proxy.py hands tunnelled
        # data to no plugin hook, so the client connection's recv is wrapped.
        recv = self.client.recv

        def counting_recv(size):
            data = recv(size)
            if data is None:
                return data
            if self.target is None:
                self.early_up += len(data)
            elif not recorder().transfer(self.grant, *self.target, up=len(data)):
                self._cut()
            return data

        self.client.recv = counting_recv

    def before_upstream_connection(self, request):
        rec = recorder()
        host, port = force_str(request.host or b"").strip("[]"), request.port
        grant = grant_of(request)
        if grant is None or grant.revoked:
            raise reject(407, NO_GRANT)
        self.grant = grant
        if grant.capped:
            rec.denied(grant, host, port, "Egress byte cap reached.")
            raise reject(403, cap_reached(grant))
        try:
            addresses = egress_policy(grant.domains).resolve(host, port)
        except Refused as exc:
            rec.denied(grant, host, port, str(exc))
            logger.info("egress denied for %s: %s:%s (%s)", grant.owner, host, port, exc)
            raise reject(403, str(exc)) from None
        self.target, self.address = (host, port), addresses[0]
        rec.allowed(grant, host, port)
        # The request itself, body included, went up too: proxy.py reads it
        # whole (within EGRESS_MAX_REQUEST_BYTES, see handler.py) before this
        # plugin exists, so no recv of ours saw it. Past the cap, it is not forwarded.
        if not rec.transfer(grant, host, port, up=request.total_size + self.early_up):
            rec.denied(grant, host, port, "Egress byte cap reached.")
            raise reject(403, cap_reached(grant))
        return request

    def handle_client_request(self, request):
        # Called for the first request (checked above) and for every later
        # one a kept-alive connection carries: each is checked again, so a
        # connection opened before the run's end carries nothing after it.
        if self.requests and not self._still_granted(request):
            raise reject(407, NO_GRANT)
        self.requests += 1
        return request

    def _still_granted(self, request) -> bool:
        grant = grant_of(request)
        return grant is not None and grant.id == self.grant.id and not grant.revoked

    def resolve_dns(self, host, port):
        # Connect to exactly the address the policy checked: no second lookup
        # for DNS rebinding to change.
        return self.address, None

    def handle_upstream_chunk(self, chunk):
        if self.grant is not None and self.target is not None:
            if not recorder().transfer(self.grant, *self.target, down=len(chunk)):
                self._cut()
                return None
        return chunk

    def _cut(self):
        """The byte cap is passed: end this connection (and so the transfer) now."""
        if self.closed:
            return
        self.closed = True
        logger.info("egress cap reached for %s", self.grant.owner)
        try:
            self.client.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def on_access_log(self, context):
        return None  # the egress record is the log; proxy.py's own line would repeat it
