"""An API endpoint called in process with the caller's own token: the tools' one way into the platform.

The request goes through Django's URL resolver to the same DRF view a client would reach, authenticated by the
same key (its scope included), so a tool can neither see nor do what the API would refuse.
"""

import io
import json
from dataclasses import dataclass
from urllib.parse import unquote_to_bytes, urlencode

from django.core.handlers.wsgi import WSGIRequest
from django.urls import Resolver404, resolve

from belvedir.core.middleware import NulCharacterMiddleware


@dataclass
class Answer:
    status: int
    data: object

    @property
    def ok(self) -> bool:
        return self.status < 400

    def error(self) -> str:
        """The API's own error, as its client would see it: the status and the message."""
        detail = self.data.get("detail") if isinstance(self.data, dict) else None
        said = detail if isinstance(detail, str) else json.dumps(self.data)[:2000]
        return f"{self.status}: {said}"


def call(authorization: str, method: str, path: str, query: dict | None = None, body: dict | None = None, host: str = "localhost") -> Answer:
    """`method path` of the API (`/api/v1/...`, percent-encoded as a client sends it) as the token's holder; the
    JSON it answers. The path reaches the view as a server gives it (PEP 3333: decoded, its UTF-8 bytes as
    Latin-1), and through the same NUL guard as a request from outside (NulCharacterMiddleware)."""
    query_string = urlencode({k: v for k, v in (query or {}).items() if v is not None}, doseq=True)
    raw = json.dumps(body).encode() if body is not None else b""
    request = WSGIRequest(
        {
            "REQUEST_METHOD": method,
            "PATH_INFO": unquote_to_bytes(path).decode("iso-8859-1"),
            "QUERY_STRING": query_string,
            "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(raw)),
            "HTTP_AUTHORIZATION": authorization,
            "HTTP_HOST": host,
            "SERVER_NAME": host.split(":")[0],
            "SERVER_PORT": "443",
            "wsgi.url_scheme": "https",
            "wsgi.input": io.BytesIO(raw),
        }
    )
    try:
        match = resolve(request.path_info)
    except Resolver404:
        return Answer(404, {"detail": "Not found."})
    response = NulCharacterMiddleware(lambda request: match.func(request, *match.args, **match.kwargs))(request)
    if hasattr(response, "render"):
        response.render()
    if "json" not in response.get("Content-Type", ""):
        return Answer(response.status_code, {"detail": response.content[:2000].decode("utf-8", "replace")})
    return Answer(response.status_code, json.loads(response.content) if response.content else None)
