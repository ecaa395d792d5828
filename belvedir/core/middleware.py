import logging

from django.db import InterfaceError, OperationalError, connection
from django.http import HttpResponse, JsonResponse
from django.utils.functional import SimpleLazyObject

from .actions import ensure_default_project
from .models import Membership

SESSION_KEY = "project_id"
logger = logging.getLogger(__name__)


def current_membership(request) -> Membership:
    """The signed-in user's membership in the project chosen in the header (stored in the session).

    A project the user has left or was removed from is no longer found, so
    they land back in their first project.
    """
    memberships = Membership.objects.filter(user=request.user).select_related("project")
    chosen = request.session.get(SESSION_KEY)
    membership = memberships.filter(project_id=chosen).first() if chosen else None
    if membership is None:
        membership = memberships.order_by("pk").first()
    if membership is None:
        ensure_default_project(request.user)
        membership = memberships.order_by("pk").first()
    return membership


def choose_project(request, project):
    request.session[SESSION_KEY] = project.pk


class CurrentProjectMiddleware:
    """Sets `request.membership` and `request.project` for signed-in dashboard users (lazily: one query when used)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.user.is_authenticated:
            request.membership = SimpleLazyObject(lambda: current_membership(request))
            request.project = SimpleLazyObject(lambda: request.membership.project)
        else:
            request.membership = request.project = None
        return self.get_response(request)


class DatabaseUnavailableMiddleware:
    """A database that is down or restarting answers 503 with Retry-After, not 500.

    Clients (trace exporters, the CLI) retry a 503; the connection that broke
    is dropped so the next request reconnects.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        try:
            return self.get_response(request)
        except (OperationalError, InterfaceError) as exc:
            return self._unavailable(exc)

    def process_exception(self, request, exception):
        if isinstance(exception, (OperationalError, InterfaceError)):
            return self._unavailable(exception)
        return None

    def _unavailable(self, exc):
        logger.warning("database unavailable: %s", str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        connection.close_if_unusable_or_obsolete()
        response = JsonResponse({"detail": "The service is temporarily unavailable; retry shortly."}, status=503)
        response["Retry-After"] = "5"
        return response


class NulCharacterMiddleware:
    """An address with a NUL character (%00) in its path or parameters answers 400, not 500.

    PostgreSQL text cannot hold NUL, so no stored value can match one, and a
    lookup with it raises deep in a view (a session's search, a session id).
    Forms and serializers refuse NUL in bodies already.
    """

    MESSAGE = "The address contains a NUL character (%00), which nothing here can hold: remove it."

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if "\x00" in request.path or ("%00" in request.META.get("QUERY_STRING", "") and _has_nul(request.GET)):
            if request.path.startswith("/api/"):
                return JsonResponse({"detail": self.MESSAGE}, status=400)
            return HttpResponse(self.MESSAGE, status=400, content_type="text/plain; charset=utf-8")
        return self.get_response(request)


def _has_nul(params) -> bool:
    return any("\x00" in key or any("\x00" in value for value in values) for key, values in params.lists())
