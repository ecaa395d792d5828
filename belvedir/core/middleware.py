import logging

from django.db import InterfaceError, OperationalError, connection
from django.http import JsonResponse
from django.utils.functional import SimpleLazyObject

from .actions import ensure_default_project
from .models import Project

SESSION_KEY = "project_id"
logger = logging.getLogger(__name__)


def current_project(request):
    chosen = request.session.get(SESSION_KEY)
    if chosen:
        project = Project.objects.for_user(request.user).filter(pk=chosen).first()
        if project:
            return project
    return ensure_default_project(request.user)


class CurrentProjectMiddleware:
    """Sets `request.project` for signed-in dashboard users (lazily: one query when used)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.user.is_authenticated:
            request.project = SimpleLazyObject(lambda: current_project(request))
        else:
            request.project = None
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
