from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from belvedir.core.decorators import owner_required
from belvedir.core.errors import TeamError
from belvedir.core.forms import DeleteProjectForm
from belvedir.core.htmx import polled
from belvedir.core.middleware import SESSION_KEY
from belvedir.core.models import Membership

from . import actions
from .overview import overview, running_evals


@login_required
def home(request):
    if request.htmx and request.GET.get("part") == "evals":
        evals = running_evals(request.project)
        return polled(render(request, "workspace/_running_evals.html", {"running_evals": evals}), done=not evals)
    is_owner = request.membership.role == Membership.Role.OWNER
    return render(request, "workspace/home.html", {**overview(request.project), "is_owner": is_owner})


@login_required
@owner_required
@require_POST
def delete_project(request):
    project = request.project
    form = DeleteProjectForm(request.POST, project=project)
    if not form.is_valid():
        messages.error(request, form.errors["confirm"][0])
        return redirect("members")
    try:
        actions.delete_project(project, forfeit_cents=form.cleaned_data["forfeit_cents"] or 0)
    except TeamError as exc:
        messages.error(request, str(exc))
        return redirect("members")
    request.session.pop(SESSION_KEY, None)
    messages.success(request, f"Project {form.cleaned_data['confirm']} deleted.")
    return redirect("home")
