"""`/mcp`: the MCP server over streamable HTTP, stateless with JSON answers, from a plain Django view.

Each POST is self-contained: the caller's key is checked here as the API checks it, then the SDK's session
manager handles the one message, with who is calling in a context variable the tools read. The manager is made
per request (its task group can be entered once) and driven with async_to_sync, which runs the tools' ORM work
in this request's thread. Only POST is served: the SDK would hold a GET (a server-to-client stream) open forever,
which a sync worker cannot afford; clients take the 405 and carry on.

The MCP SDK (pydantic models, starlette, anyio: 1.5 s at import) is imported on the first call, not with the URLconf:
every management command that runs the system checks loads the URLs, and none of them serves MCP. gunicorn's master
imports it before forking (gunicorn.conf.py), so no worker pays it on a request.
"""

from asgiref.sync import async_to_sync
from django.http import HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions
from rest_framework.request import Request

from belvedir.core.authentication import ApiKeyAuthentication
from belvedir.core.models import ApiKey


@csrf_exempt
def mcp_endpoint(request):
    if request.method != "POST":
        return HttpResponse(status=405, headers={"Allow": "POST"})
    try:
        found = ApiKeyAuthentication().authenticate(Request(request))
    except exceptions.AuthenticationFailed as exc:
        return JsonResponse({"detail": str(exc.detail)}, status=401, headers={"WWW-Authenticate": "Bearer"})
    if found is None:
        return JsonResponse(
            {"detail": "Authentication credentials were not provided: send Authorization: Bearer <API key>."},
            status=401,
            headers={"WWW-Authenticate": "Bearer"},
        )
    if found[1].scope == ApiKey.Scope.INGEST:
        return JsonResponse({"detail": "This API key may only send traces (scope 'ingest'): use a key of scope 'read' or 'full'."}, status=403)
    from .server import Caller, caller

    token = caller.set(Caller(request.headers["Authorization"], request.get_host()))
    try:
        return async_to_sync(_handle)(request)
    finally:
        caller.reset(token)


async def _handle(request) -> HttpResponse:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    from .server import server

    manager = StreamableHTTPSessionManager(app=server._lowlevel_server, stateless=True, json_response=True)
    body, answered = request.body, {"status": 500, "headers": [], "body": []}
    delivered = False

    async def receive():
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        return {"type": "http.disconnect"}

    async def send(message):
        if message["type"] == "http.response.start":
            answered["status"], answered["headers"] = message["status"], message.get("headers", [])
        elif message["type"] == "http.response.body":
            answered["body"].append(message.get("body", b""))

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.path.encode(),
        "root_path": "",
        "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"),
        "headers": [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in request.headers.items()],
        "server": (request.get_host().split(":")[0], int(request.get_port())),
        "client": (request.META.get("REMOTE_ADDR", ""), 0),
    }
    async with manager.run():
        await manager.handle_request(scope, receive, send)
    response = HttpResponse(b"".join(answered["body"]), status=answered["status"])
    for name, value in answered["headers"]:
        if name.lower() != b"content-length":
            response[name.decode("latin-1")] = value.decode("latin-1")
    return response
