"""A reviewer (Membership.Role.REVIEWER) reads everything of their project and labels its review queues; every other
change is refused with 403.

Two doors, deny by default: the dashboard (`ReviewerMiddleware`: an unsafe request to a page outside the review app
and the account pages below) and the API (`belvedir.core.permissions`: an unsafe request to a view without
`reviewers_may_write`). The admin is staff's, and keeps its own permissions.
"""

from django.shortcuts import render

from .models import Membership

MESSAGE = "A reviewer of this project reads everything and labels review queues, and changes nothing else; an owner can make you a member."
# What anyone signed in does to their own account and memberships, whatever their role in the project shown.
ACCOUNT_PAGES = {
    "logout",
    "email_settings",
    "switch_project",
    "new_project",
    "leave_project",
    "invitation",
    "api_keys",
    "revoke_api_key",
}
# The review page, where a label or a skip is posted; every other page of the review app changes a queue.
REVIEWER_PAGES = {"review:review"}
OPEN_NAMESPACES = {"admin"}
SAFE = {"GET", "HEAD", "OPTIONS", "TRACE"}


def is_reviewer(user, project) -> bool:
    return Membership.objects.filter(user=user, project=project, role=Membership.Role.REVIEWER).exists()


class ReviewerMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        if request.method in SAFE or not request.user.is_authenticated or request.path.startswith(("/api/", "/mcp")):
            return None
        match = request.resolver_match
        if match is None or match.url_name in ACCOUNT_PAGES or match.view_name in REVIEWER_PAGES or OPEN_NAMESPACES & set(match.namespaces):
            return None
        if request.membership.role != Membership.Role.REVIEWER:
            return None
        return render(request, "core/reviewer_only.html", {"message": MESSAGE}, status=403)
