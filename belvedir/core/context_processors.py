from django.utils.functional import SimpleLazyObject

from .models import Membership


def projects(request):
    """The signed-in user's projects for the header's switcher; queried only when a page shows it."""
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {}
    return {
        "my_projects": SimpleLazyObject(
            lambda: [m.project for m in Membership.objects.filter(user=request.user).select_related("project").order_by("project__name", "pk")]
        )
    }
