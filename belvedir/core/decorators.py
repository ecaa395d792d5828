from functools import wraps

from django.shortcuts import render

from .models import Membership


def owner_required(view):
    """Owner-only dashboard pages (billing, members, secrets, deleting the project): 403 for members.

    Wrap inside `login_required`, so the signed-out are sent to log in first.
    """

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if request.membership.role != Membership.Role.OWNER:
            return render(request, "core/owner_only.html", status=403)
        return view(request, *args, **kwargs)

    return wrapper
