from django.contrib.auth import get_user_model
from django.db import transaction

from .models import Membership, Project


@transaction.atomic
def create_account(*, username: str, password: str | None, email: str = ""):
    """Sign-up: a user and their default project, in one transaction."""
    user = get_user_model().objects.create_user(username=username, email=email, password=password)
    ensure_default_project(user)
    return user


def ensure_default_project(user) -> Project:
    """The user's first project, created on first need.

    Sign-up calls this, and so does the middleware, so users made in admin or
    with `createsuperuser` get a project too without a post_save signal.
    """
    membership = Membership.objects.filter(user=user).select_related("project").order_by("pk").first()
    if membership:
        return membership.project
    with transaction.atomic():
        project = Project.objects.create(name=f"{user.username}'s project")
        Membership.objects.create(project=project, user=user, role=Membership.Role.OWNER)
    return project
