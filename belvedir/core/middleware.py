from django.utils.functional import SimpleLazyObject

from .actions import ensure_default_project
from .models import Project

SESSION_KEY = "project_id"


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
