from rest_framework import permissions

from . import reviewers
from .models import ApiKey, Membership

READ_ONLY = "This API key is read-only (scope 'read'): it may read everything of its project but change nothing. Use a key of scope 'full'."


class HasFullScope(permissions.BasePermission):
    """The default: signed in; a read-only key for reads only; an ingest-only key for nothing here."""

    message = "This API key may only send traces (scope 'ingest')."

    def has_permission(self, request, view):
        if not (request.user and request.user.is_authenticated):
            return False
        if not _reviewer_may(request, view):
            self.message = reviewers.MESSAGE
            return False
        if not isinstance(request.auth, ApiKey) or request.auth.scope == ApiKey.Scope.FULL:
            return True
        if request.auth.scope == ApiKey.Scope.READ:
            self.message = READ_ONLY
            return request.method in permissions.SAFE_METHODS
        return False


class HasIngestScope(permissions.BasePermission):
    """Trace ingest: a key of the project of scope full or ingest (sending traces writes)."""

    message = READ_ONLY

    def has_permission(self, request, view):
        if not (request.user and request.user.is_authenticated):
            return False
        if not _reviewer_may(request, view):
            self.message = reviewers.MESSAGE
            return False
        return not (isinstance(request.auth, ApiKey) and request.auth.scope == ApiKey.Scope.READ)


def _reviewer_may(request, view) -> bool:
    """A reviewer's unsafe request goes only to views that say reviewers may write (the review queues' labels)."""
    if request.method in permissions.SAFE_METHODS or getattr(view, "reviewers_may_write", False):
        return True
    return not reviewers.is_reviewer(request.user, request_project(request))


def request_project(request):
    """The project an API request acts on: the key's, or the dashboard's current one."""
    if isinstance(request.auth, ApiKey):
        return request.auth.project
    return request._request.project


def is_owner(user, project) -> bool:
    return Membership.objects.filter(user=user, project=project, role=Membership.Role.OWNER).exists()


class IsProjectOwner(HasFullScope):
    """Owner-only API actions: billing, members, secrets, deleting the project."""

    message = "Only an owner of the project may do this."

    def has_permission(self, request, view):
        return super().has_permission(request, view) and is_owner(request.user, request_project(request))
