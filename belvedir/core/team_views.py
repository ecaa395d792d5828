"""Members, invitations and projects: the pages behind Settings → Members and the header's switcher."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from belvedir.core.ids import parse_id

from . import actions
from .decorators import owner_required
from .email_views import send_invitation
from .errors import TeamError
from .forms import DeleteProjectForm, InviteForm, ProjectForm
from .middleware import choose_project
from .models import Invitation, Membership, Project


def invitation_url(request, raw_token):
    return request.build_absolute_uri(reverse("invitation", args=[raw_token]))


@login_required
def members(request):
    project = request.project
    is_owner = request.membership.role == Membership.Role.OWNER
    form = InviteForm(request.POST or None)
    link = None
    if request.method == "POST":
        if not is_owner:
            return render(request, "core/owner_only.html", status=403)
        if form.is_valid():
            try:
                invitation, raw = actions.invite_member(project, request.user, form.cleaned_data["who"])
            except TeamError as exc:
                form.add_error("who", str(exc))
            else:
                if raw is None:
                    messages.success(
                        request, f"Invitation for {invitation.email} created. It is mailed there once someone verifies that address, and goes to them."
                    )
                else:
                    # Rendered, not redirected: the link is shown once and only its hash is kept.
                    link = invitation_url(request, raw)
                    send_invitation(request, invitation, raw)
                    messages.success(request, f"Invitation for {invitation.user.username} created. Send them the link below.")
                form = InviteForm()
    context = {
        "memberships": Membership.objects.filter(project=project).select_related("user").order_by("-role", "user__username"),
        "invitations": Invitation.objects.filter(project=project).select_related("user", "invited_by")[:50] if is_owner else [],
        "form": form,
        "link": link,
        "is_owner": is_owner,
        "delete_form": DeleteProjectForm(project=project) if is_owner else None,
    }
    return render(request, "core/members.html", context)


def _member_action(request, pk, do, done):
    membership = get_object_or_404(Membership.objects.filter(project=request.project).select_related("user"), pk=pk)
    try:
        do(membership)
    except TeamError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, done(membership))
    return redirect("members")


@login_required
@owner_required
@require_POST
def remove_member(request, pk):
    return _member_action(
        request,
        pk,
        lambda m: actions.remove_member(request.project, m.user),
        lambda m: f"{m.user.username} removed; their API keys for this project are revoked.",
    )


@login_required
@owner_required
@require_POST
def make_owner(request, pk):
    return _member_action(
        request,
        pk,
        lambda m: actions.transfer_ownership(request.project, request.user, m.user),
        lambda m: f"{m.user.username} now owns {request.project.name}.",
    )


@login_required
@owner_required
@require_POST
def set_role(request, pk):
    role = request.POST.get("role", "")
    return _member_action(
        request,
        pk,
        lambda m: actions.set_role(request.project, request.user, m.user, role),
        lambda m: f"{m.user.username} is now a {role} of {request.project.name}.",
    )


@login_required
@owner_required
@require_POST
def revoke_invitation(request, pk):
    invitation = get_object_or_404(Invitation.objects.filter(project=request.project), pk=pk)
    actions.revoke_invitation(invitation)
    messages.success(request, "Invitation revoked.")
    return redirect("members")


@login_required
@require_POST
def leave_project(request):
    project = request.project
    try:
        actions.remove_member(project, request.user)
    except TeamError as exc:
        messages.error(request, str(exc))
        return redirect("members")
    messages.success(request, f"You left {project.name}.")
    return redirect("home")


@login_required
def invitation(request, token):
    try:
        found = actions.invitation_for(token, request.user)
    except TeamError as exc:
        return render(request, "core/invitation.html", {"error": str(exc)}, status=exc.status_code)
    if request.method == "POST":
        try:
            if request.POST.get("answer") == "accept":
                actions.accept_invitation(found)
                choose_project(request, found.project)
                messages.success(request, f"Welcome to {found.project.name}.")
                return redirect("home")
            actions.decline_invitation(found)
            messages.success(request, f"Invitation to {found.project.name} declined.")
            return redirect("home")
        except TeamError as exc:
            return render(request, "core/invitation.html", {"invitation": found, "error": str(exc)}, status=exc.status_code)
    status = 200 if found.is_pending else 410
    return render(request, "core/invitation.html", {"invitation": found}, status=status)


@login_required
def new_project(request):
    form = ProjectForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        project = actions.create_project(request.user, form.cleaned_data["name"])
        choose_project(request, project)
        messages.success(request, f"Project {project.name} created. You own it.")
        return redirect("home")
    return render(request, "core/new_project.html", {"form": form})


@login_required
@require_POST
def switch_project(request):
    chosen = request.POST.get("project", "")
    project = get_object_or_404(Project.objects.for_user(request.user), pk=parse_id(chosen) or 0)
    choose_project(request, project)
    # Back to the page that asked (a teammate's link into this project), never off this site.
    wanted = request.POST.get("next", "")
    if wanted and url_has_allowed_host_and_scheme(wanted, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        return redirect(wanted)
    return redirect("home")
