"""One object of the current project, or a 404 that helps: an object that belongs to another of the user's projects
(a teammate's link) is named with that project, and its page offers to switch to it.

Its existence is told only to members of the project that holds it: to anyone else it is not found, as before.
"""

from django.core.exceptions import ValidationError
from django.http import Http404

from .models import Project, ProjectScopedQuerySet


class InAnotherProject(Http404):
    """The object exists in `project`, one of the user's, not the current one."""

    def __init__(self, project: Project, what: str):
        super().__init__(f"This {what} belongs to your project {project.name}.")
        self.project = project
        self.what = what


def get_scoped_or_404(request, queryset: ProjectScopedQuerySet, **lookup):
    """`queryset.get(**lookup)` (a queryset scoped to the current project), or Http404 — InAnotherProject where the
    user reaches it in another of their projects."""
    what = queryset.model._meta.verbose_name
    try:
        return queryset.get(**lookup)
    except queryset.model.DoesNotExist:
        pass
    except (ValueError, TypeError, ValidationError):  # an id of the wrong shape finds nothing anywhere
        raise Http404(f"No {what} matches that address.") from None
    path = queryset.project_path
    elsewhere = (
        type(queryset)(model=queryset.model, using=queryset.db)
        .for_user(request.user)
        .exclude(**{path: request.project})
        .filter(**lookup)
        .values_list(path, flat=True)
        .first()
    )
    if elsewhere is not None:
        raise InAnotherProject(Project.objects.get(pk=elsewhere), what)
    raise Http404(f"No {what} matches that address in {request.project.name}.")
