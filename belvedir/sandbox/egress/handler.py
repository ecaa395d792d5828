"""The proxy's connection handler: proxy.py's own, with a bound on what one request holds.

proxy.py reads a plain-HTTP request whole, body included, before any plugin
sees it (the first request of a connection in HttpProtocolHandler, each later
one in HttpProxyPlugin's pipeline parser), so without a bound one harness
could make the host's proxy hold any amount. A request whose headers and
body pass EGRESS_MAX_REQUEST_BYTES is refused with 413 as soon as that is
known: at its headers when it declares a Content-Length, else when its bytes
pass the limit. Its rest is read and dropped, not held, until its declared
end (a chunked one until the sandbox closes or the proxy's idle timeout), so
the sandbox gets to read the answer instead of a reset mid-send. Every byte
counts toward the grant's egress, under the refusal, and the cap cuts the
connection as it does any other. HTTPS goes through a CONNECT tunnel, which
proxy.py relays as it comes, and is not bounded by this.
"""

from django.conf import settings
from django.utils.encoding import force_str
from proxy.http.handler import HttpProtocolHandler
from proxy.http.parser import HttpParser, httpParserStates

from .plugin import NO_GRANT, cap_reached, grant_of, reject
from .recorder import recorder

UNTIL_CLOSED = -1


def declared_length(request: HttpParser) -> int | None:
    """The body's Content-Length once the headers are in, or None (not yet, chunked, absent, malformed)."""
    if request.state < httpParserStates.HEADERS_COMPLETE or request.is_chunked_encoded or not request.has_header(b"content-length"):
        return None
    try:
        return int(request.header(b"content-length"))
    except ValueError:
        return None  # proxy.py's parser answers it with 400


class BoundedRequestHandler(HttpProtocolHandler):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.limit = settings.EGRESS_MAX_REQUEST_BYTES
        # While a refused request's rest is read and dropped: bytes left, or UNTIL_CLOSED.
        self.draining: int | None = None
        self.refused = None  # (grant, host, port, reason) its bytes count under, or None when the plugin counts them

    def handle_data(self, data):
        if data is None:
            return super().handle_data(data)
        if self.draining is not None:
            return self._drain(len(data))
        request = self._request_being_read()
        # Without a declared length, the limit is checked before the bytes are taken in.
        if request is not None and declared_length(request) is None and request.total_size + len(data) > self.limit:
            return self._refuse(request, unread=len(data), left=UNTIL_CLOSED)
        teardown = super().handle_data(data)
        request = self._request_being_read()
        if not teardown and request is not None and (length := declared_length(request)) is not None:
            body = len(request.body or b"")
            if request.total_size - body + length > self.limit:
                return self._refuse(request, unread=0, left=length - body)
        return teardown

    def _request_being_read(self) -> HttpParser | None:
        if not self.request.is_complete:
            return self.request
        pipelined = getattr(self.plugin, "pipeline_request", None)
        return pipelined if pipelined is not None and not pipelined.is_complete else None

    def _refuse(self, request: HttpParser, unread: int, left: int) -> bool:
        """Answer the refusal; True when the connection is to close now, False while the rest is drained."""
        limit = f"{self.limit // (1024 * 1024)} MB"
        if request.state < httpParserStates.HEADERS_COMPLETE:
            # Nobody to count it for yet: a header block this size is no client's.
            return self._answer(reject(431, f"request headers over the {limit} limit."), request)
        grant = grant_of(request)
        if grant is None or grant.revoked:
            return self._answer(reject(407, NO_GRANT), request)
        rec = recorder()
        host, port = force_str(request.host or b"").strip("[]"), request.port or 0
        reason = f"Plain-HTTP request over the {limit} limit."
        rec.denied(grant, host, port, reason)
        # A connection's first request has no plugin yet to count its bytes
        # (plugin.py wraps recv for the later ones): this counts them.
        self.refused = (grant, host, port, reason) if self.plugin is None else None
        if self.refused and not rec.transfer(grant, host, port, up=request.total_size + unread, reason=reason):
            return self._answer(reject(403, cap_reached(grant)), request)
        request.body = None  # what was read of it is dropped now
        self.work.queue(
            reject(413, f"a plain-HTTP request (headers and body) may be at most {limit}; send large bodies over HTTPS, which streams.").response(request)
        )
        self.draining = left
        return self._drain(unread)

    def _answer(self, refusal, request) -> bool:
        self.work.queue(refusal.response(request))
        return True

    def _drain(self, size: int) -> bool:
        if self.refused and size and not recorder().transfer(*self.refused[:3], up=size, reason=self.refused[3]):
            return True  # the cap is passed: cut, as plugin.py cuts a tunnel
        if self.draining == UNTIL_CLOSED:
            return False
        self.draining -= size
        return self.draining <= 0
