from django import template

from belvedir.core.models import Membership
from review.models import Queue

register = template.Library()


@register.inclusion_tag("review/_add.html", takes_context=True)
def add_to_queue(context, kind: str, ident, step: int | None = None):
    """An "add to review queue" form for one session, step, sample or trial; the project's queues are read once a page."""
    request = context["request"]
    if request.membership.role == Membership.Role.REVIEWER:
        return {"queues": []}  # reviewers label queues; owners and members fill them
    if not hasattr(request, "_review_queues"):
        request._review_queues = list(Queue.objects.filter(project=request.project).exclude(judge_key__gt="").values_list("pk", "name")[:50])
    return {
        "queues": request._review_queues,
        "kind": kind,
        "ident": ident,
        "step": step,
        "next": request.get_full_path(),
        "csrf_token": context.get("csrf_token"),
    }
