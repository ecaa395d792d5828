"""Verified email addresses: the signed links that prove one, and who holds one.

An address is someone's only once they follow a link mailed to it. Until then
it receives no invitation and no password reset: whoever signs up first with
another person's address must not receive what is sent to that person.

The link carries the user's id and the address, signed with SECRET_KEY and a
timestamp (django.core.signing), so nothing is stored until it is used: a
changed address or a tampered link fails the signature, an old one the age.
"""

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import signing
from django.core.mail import send_mail
from django.db.models import F
from django.urls import reverse

from .errors import Gone, TeamError

SALT = "belvedir.core.verification"


def is_verified(user) -> bool:
    record = getattr(user, "verified_email", None) if user.pk else None
    return bool(user.email) and record is not None and record.email.lower() == user.email.lower()


def verified_owner(email: str):
    """The active account holding this address verified, or None."""
    return (
        get_user_model().objects.filter(is_active=True, email__iexact=email, verified_email__email__iexact=F("email")).select_related("verified_email").first()
    )


def make_token(user) -> str:
    return signing.dumps({"u": user.pk, "e": user.email.lower()}, salt=SALT)


def read_token(token: str) -> tuple[int, str]:
    """(user id, address) of a link still valid; TeamError saying why not otherwise."""
    try:
        data = signing.loads(token, salt=SALT, max_age=settings.EMAIL_VERIFICATION_MAX_AGE_HOURS * 3600)
    except signing.SignatureExpired:
        raise Gone("This verification link has expired: send yourself a new one from Settings → Email.") from None
    except signing.BadSignature:
        raise TeamError("This verification link is not valid.", 400) from None
    if not isinstance(data, dict) or not isinstance(data.get("u"), int) or not isinstance(data.get("e"), str):
        raise TeamError("This verification link is not valid.", 400)
    return data["u"], data["e"]


def send_verification(request, user):
    """Mail a verification link to the user's address, or, when another account
    already holds it verified, tell that owner someone tried to use it.

    The caller answers the same either way ("check your inbox"), so neither
    sign-up nor this page tells a stranger whether an address is registered.
    """
    if not user.email:
        return
    owner = verified_owner(user.email)
    if owner is not None and owner.pk != user.pk:
        send_mail(
            "Someone tried to use your address on Belvedir",
            f"Someone signed up on Belvedir (as {user.username}) with this address, which is already verified for your "
            f"account {owner.username}. It was not given to them: nothing was changed on your account.\n\n"
            f"If it was you, log in as {owner.username}; forgot your password? {request.build_absolute_uri(reverse('password_reset'))}\n",
            None,
            [owner.email],
        )
        return
    if owner is not None:
        return  # already verified: nothing to prove again
    link = request.build_absolute_uri(reverse("verify_email", args=[make_token(user)]))
    hours = settings.EMAIL_VERIFICATION_MAX_AGE_HOURS
    send_mail(
        "Verify your address on Belvedir",
        f"To verify this address for the Belvedir account {user.username}, open this link within {hours} hours:\n\n{link}\n\n"
        "Invitations and password resets reach this address only once it is verified. "
        "If you did not sign up, ignore this message: the address stays unverified.\n",
        None,
        [user.email],
    )


def send_invitation(request, invitation, raw_token: str):
    """Mail an invitation's link to its user, if their address is verified (else the owner passes the link on)."""
    user = invitation.user
    if user is None or not is_verified(user):
        return
    link = request.build_absolute_uri(reverse("invitation", args=[raw_token]))
    by = invitation.invited_by.username if invitation.invited_by else "An owner"
    send_mail(
        f"Invitation to {invitation.project.name} on Belvedir",
        f"{by} invited you ({user.username}) to work in {invitation.project.name}. Open this link to accept or decline; "
        f"it works for your account alone and expires {invitation.expires_at:%Y-%m-%d %H:%M} UTC:\n\n{link}\n",
        None,
        [user.email],
    )
