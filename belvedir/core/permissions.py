from rest_framework import permissions

from .models import ApiKey, Membership


class HasFullScope(permissions.BasePermission):
    """The default: signed in, and not with an ingest-only key."""

    message = "This API key may only send traces (scope 'ingest')."

    def has_permission(self, request, view):
        if not (request.user and request.user.is_authenticated):
            return False
        return not (isinstance(request.auth, ApiKey) and request.auth.scope != ApiKey.Scope.FULL)


class HasIngestScope(permissions.BasePermission):
    """Trace ingest: any valid key of the project, full or ingest."""

    def has_permission(self, request, view):
        return bool(request.user and request.user.is_authenticated)


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
