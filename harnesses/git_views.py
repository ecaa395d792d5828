"""The shipped drivers over git's smart HTTP: fetch only (clone, ls-remote), never push."""

from django.http import HttpResponse, HttpResponseNotFound, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from . import drivers

# A driver repo is a few hundred KB; these bound a misbehaving client, not a real one.
MAX_REQUEST_BYTES = 1024 * 1024
MAX_RESPONSE_BYTES = 50 * 1024 * 1024
BACKEND_SECONDS = 60
FETCH = {("GET", "info/refs"), ("POST", "git-upload-pack")}


@csrf_exempt  # git posts without a CSRF token; the endpoint changes nothing
def driver_repo(request, name, rest):
    if "receive-pack" in rest or request.GET.get("service") == "git-receive-pack":
        return HttpResponse("These driver repositories are read-only.\n", status=403, content_type="text/plain")
    if (request.method, rest) not in FETCH or name not in drivers.names():
        return HttpResponseNotFound("Not a driver repository path.\n", content_type="text/plain")
    if rest == "info/refs" and request.GET.get("service") != "git-upload-pack":
        return HttpResponse("Only git's smart HTTP protocol is served.\n", status=403, content_type="text/plain")
    body = request.read(MAX_REQUEST_BYTES + 1)
    if len(body) > MAX_REQUEST_BYTES:
        return HttpResponse("Request too large.\n", status=413, content_type="text/plain")
    headers = {
        "content_type": request.META.get("CONTENT_TYPE", ""),
        "content_encoding": request.META.get("HTTP_CONTENT_ENCODING", ""),
        "git_protocol": request.META.get("HTTP_GIT_PROTOCOL", ""),
    }
    try:
        backend = drivers.http_backend(
            name,
            rest,
            request.method,
            request.META.get("QUERY_STRING", ""),
            body,
            headers,
            timeout=BACKEND_SECONDS,
            max_bytes=MAX_RESPONSE_BYTES,
        )
    except drivers.Busy as exc:
        response = HttpResponse(f"{exc}\n", status=503, content_type="text/plain")
        response["Retry-After"] = "5"
        return response
    response = StreamingHttpResponse(backend.body, status=backend.status, content_type=backend.headers.pop("Content-Type", "application/octet-stream"))
    for key, value in backend.headers.items():
        response[key] = value
    return response
