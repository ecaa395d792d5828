import secrets
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.utils import timezone

from .errors import Gone, NotFound, TeamError
from .models import ApiKey, Invitation, Membership, Project, ProjectSecret, VerifiedEmail, hash_key
from .usernames import validate_username
from .verification import verified_owner


@transaction.atomic
def create_account(*, username: str, password: str | None, email: str = "", verified: bool = True):
    """A user and their default project, in one transaction.

    Sign-up passes `verified=False`: its address is the user's only once they
    follow the link mailed to it. Accounts made by the platform itself (the
    demo login, test fixtures) hold addresses nobody else claims.
    """
    validate_username(username)
    user = get_user_model().objects.create_user(username=username, email=email, password=password)
    if verified and email:
        VerifiedEmail.objects.create(user=user, email=email)
    ensure_default_project(user)
    return user


@transaction.atomic
def verify_email(user_id: int, email: str) -> tuple[object, list[tuple[Invitation, str]]]:
    """Mark the address of a followed link verified, and hand over the invitations
    that waited for it: (the user, [(invitation, its new raw token)]) to mail.

    Only the account the link was made for, and only while that is still its
    address; refused when another account verified the address first.
    """
    user = get_user_model().objects.select_for_update().filter(pk=user_id, is_active=True).first()
    if user is None or user.email.lower() != email.lower():
        raise Gone("This verification link is for an address your account no longer uses.")
    owner = verified_owner(email)
    if owner is not None and owner.pk != user.pk:
        raise TeamError("Another account has verified this address already.", 409)
    # A record left by an account that has since changed its address holds it no longer.
    VerifiedEmail.objects.filter(email__iexact=email).exclude(user=user).delete()
    try:
        with transaction.atomic():
            VerifiedEmail.objects.update_or_create(user=user, defaults={"email": user.email, "verified_at": timezone.now()})
    except IntegrityError:
        # Two accounts following their links for one address at once: the first commit holds it.
        raise TeamError("Another account has verified this address already.", 409) from None
    delivered = []
    waiting = Invitation.objects.filter(
        user__isnull=True, email__iexact=email, accepted_at__isnull=True, declined_at__isnull=True, revoked_at__isnull=True, expires_at__gt=timezone.now()
    ).select_related("project", "invited_by")
    for invitation in waiting:
        if Membership.objects.filter(project=invitation.project, user=user).exists():
            continue
        # Nobody knows the waiting invitation's token; a new one is made here and mailed to the now-verified address.
        raw = secrets.token_urlsafe(32)
        if Invitation.objects.filter(pk=invitation.pk, user__isnull=True).update(user=user, token_hash=hash_key(raw)):
            invitation.user = user
            delivered.append((invitation, raw))
    return user, delivered


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


def save_secret(project: Project, name: str, value: str) -> ProjectSecret:
    """Create or replace a project secret (dashboard and API)."""
    return ProjectSecret.objects.update_or_create(project=project, name=name, defaults={"value": value, "updated_at": timezone.now()})[0]


# -- teams -------------------------------------------------------------------


@transaction.atomic
def create_project(user, name: str) -> Project:
    project = Project.objects.create(name=name)
    Membership.objects.create(project=project, user=user, role=Membership.Role.OWNER)
    return project


def find_user(username_or_email: str):
    """An email finds the account that verified it (case-insensitive), anything else the exact
    username; None when no one matches.

    An email never matches a username: an account named like someone's address
    (made before usernames refused @) must not take the invitation meant for them.
    Nor does an address anyone typed at sign-up: only the one who followed its link holds it.
    """
    value = username_or_email.strip()
    if "@" not in value:
        return get_user_model().objects.filter(is_active=True, username=value).first()
    return verified_owner(value)


def invite_member(project: Project, invited_by, username_or_email: str) -> tuple[Invitation, str | None]:
    """A pending invitation and its raw token (shown once, stored hashed).

    An address nobody has verified yet gets an invitation that waits, with no
    token anyone knows (None): it goes to whoever verifies the address, with a
    token mailed there (verify_email). Saying "no such user" instead would tell
    the owner which addresses are registered.
    """
    value = username_or_email.strip()
    if "@" in value:
        try:
            validate_email(value)
        except ValidationError:
            raise TeamError(f"{value!r} is not a valid email address.") from None
    user = find_user(value)
    if user is None and "@" not in value:
        raise NotFound(f"No user {value!r}: they sign up first, then you invite them.")
    if user is not None and Membership.objects.filter(project=project, user=user).exists():
        raise TeamError(f"{user.username} is already a member of {project.name}.", 409)
    raw = secrets.token_urlsafe(32)
    invitation = Invitation.objects.create(
        project=project,
        user=user,
        email=value if "@" in value else "",
        invited_by=invited_by,
        token_hash=hash_key(raw),
        expires_at=timezone.now() + timedelta(days=settings.INVITATION_MAX_AGE_DAYS),
    )
    return invitation, raw if user is not None else None


def invitation_for(raw_token: str, user) -> Invitation:
    """The invitation behind a link, for the user it was made for; another user's is 'not found'."""
    invitation = Invitation.objects.select_related("project", "invited_by").filter(token_hash=hash_key(raw_token), user=user).first()
    if invitation is None:
        raise NotFound("This invitation link is not valid for your account.")
    return invitation


def _claim(invitation: Invitation, field: str):
    # A conditional update: of two clicks racing (or a reused link) only one wins.
    claimed = Invitation.objects.filter(
        pk=invitation.pk, accepted_at__isnull=True, declined_at__isnull=True, revoked_at__isnull=True, expires_at__gt=timezone.now()
    ).update(**{field: timezone.now()})
    if not claimed:
        invitation.refresh_from_db()
        raise Gone(f"This invitation is {invitation.state} and can no longer be used.")


@transaction.atomic
def accept_invitation(invitation: Invitation) -> Membership:
    _claim(invitation, "accepted_at")
    membership, _ = Membership.objects.get_or_create(project=invitation.project, user=invitation.user, defaults={"role": Membership.Role.MEMBER})
    return membership


@transaction.atomic
def decline_invitation(invitation: Invitation):
    _claim(invitation, "declined_at")


def revoke_invitation(invitation: Invitation):
    Invitation.objects.filter(pk=invitation.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())


@transaction.atomic
def remove_member(project: Project, user):
    """The user leaves the project, and every key they hold for it stops working at once."""
    # The project's row, not the member's: two owners leaving (or removing each
    # other) at once would each see the other still there and both go, leaving
    # no owner. Locked first, the second one counts the owners the first left.
    project.lock()
    membership = Membership.objects.filter(project=project, user=user).first()
    if membership is None:
        raise NotFound("Not a member of this project.")
    if (
        membership.role == Membership.Role.OWNER
        and not Membership.objects.filter(project=project, role=Membership.Role.OWNER).exclude(pk=membership.pk).exists()
    ):
        raise TeamError("The owner cannot leave: hand over ownership first, or delete the project.", 409)
    membership.delete()
    ApiKey.objects.filter(project=project, user=user, revoked_at__isnull=True).update(revoked_at=timezone.now())


@transaction.atomic
def set_role(project: Project, by_user, to_user, role: str) -> Membership:
    """An owner makes a member a reviewer (reads and labels review queues only) or a reviewer a member again."""
    project.lock()
    if not Membership.objects.filter(project=project, user=by_user, role=Membership.Role.OWNER).exists():
        raise TeamError("Only an owner of the project may change a role.", 403)
    membership = Membership.objects.filter(project=project, user=to_user).first()
    if membership is None:
        raise NotFound("No such member of the project.")
    if role not in (Membership.Role.MEMBER, Membership.Role.REVIEWER):
        raise TeamError("A role is member or reviewer here; ownership is handed over instead.")
    if membership.role == Membership.Role.OWNER:
        raise TeamError("An owner stays an owner until they hand the project over.")
    Membership.objects.filter(pk=membership.pk).update(role=role)
    membership.role = role
    return membership


@transaction.atomic
def transfer_ownership(project: Project, from_user, to_user):
    """The new owner takes over; the previous owner stays on as a member."""
    # Under the same lock as remove_member: the giver may have been removed, or
    # have handed the project to someone else, since the page was drawn.
    project.lock()
    memberships = {m.user_id: m for m in Membership.objects.filter(project=project, user__in=[from_user, to_user])}
    giver = memberships.get(from_user.pk)
    if giver is None or giver.role != Membership.Role.OWNER:
        raise TeamError("Only an owner of the project may hand it over.", 403)
    if to_user.pk not in memberships:
        raise NotFound("Ownership goes to a member of the project: invite them first.")
    if from_user.pk == to_user.pk:
        raise TeamError("You already own this project.")
    Membership.objects.filter(pk=memberships[to_user.pk].pk).update(role=Membership.Role.OWNER)
    Membership.objects.filter(pk=giver.pk).update(role=Membership.Role.MEMBER)
