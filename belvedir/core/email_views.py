"""Email addresses: the verification link, Settings → Email (change, resend) and password resets."""

import logging
import smtplib

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import PasswordResetForm
from django.shortcuts import redirect, render
from django.urls import reverse_lazy

from . import actions, verification
from .errors import TeamError
from .forms import EmailForm
from .throttle import allow_mail_to

log = logging.getLogger(__name__)


def mail_safely(send, *args):
    """A mail server that is down must not fail the page (or tell anything by
    failing): the address keeps its state and the user can send again."""
    try:
        send(*args)
    except (smtplib.SMTPException, OSError):
        log.exception("could not send mail")


def check_inbox(email: str) -> str:
    return f"We sent a message to {email}: check your inbox to verify the address."


def send_verification(request, user):
    if user.email and allow_mail_to(user.email):
        mail_safely(verification.send_verification, request, user)


def send_invitation(request, invitation, raw):
    mail_safely(verification.send_invitation, request, invitation, raw)


def verify_email(request, token):
    try:
        user_id, email = verification.read_token(token)
    except TeamError as exc:
        return render(request, "core/verify_email.html", {"error": str(exc)}, status=exc.status_code)
    if request.method != "POST":
        # A click, not a fetch: a mail scanner that opens the link verifies nothing.
        return render(request, "core/verify_email.html", {"email": email})
    try:
        user, delivered = actions.verify_email(user_id, email)
    except TeamError as exc:
        return render(request, "core/verify_email.html", {"error": str(exc)}, status=exc.status_code)
    for invitation, raw in delivered:
        send_invitation(request, invitation, raw)
    waiting = f" {len(delivered)} invitation(s) waiting for it were mailed to you." if delivered else ""
    messages.success(request, f"{email} is verified for {user.username}.{waiting}")
    return redirect("email_settings" if request.user.is_authenticated else "login")


@login_required
def email_settings(request):
    user = request.user
    form = EmailForm(request.POST or None, initial={"email": user.email})
    if request.method == "POST":
        if request.POST.get("action") == "resend" and user.email:
            send_verification(request, user)
            messages.success(request, check_inbox(user.email))
            return redirect("email_settings")
        if form.is_valid():
            # Changed here, unverified at once (verification.is_verified compares the address).
            user.email = form.cleaned_data["email"]
            user.save(update_fields=["email"])
            send_verification(request, user)
            messages.success(request, check_inbox(user.email))
            return redirect("email_settings")
    return render(request, "core/email.html", {"form": form, "verified": verification.is_verified(user)})


class VerifiedPasswordResetForm(PasswordResetForm):
    """Django's reset form, mailing only an address its account verified.

    An unverified address may be someone else's, typed at sign-up: a reset link
    sent there would hand that account to whoever reads the mail.
    """

    def get_users(self, email):
        owner = verification.verified_owner(email)
        if owner is not None and owner.has_usable_password() and allow_mail_to(email):
            yield owner


class PasswordResetView(auth_views.PasswordResetView):
    # Django's form logs a failed send itself (5.1+) and the page reads the same whether anything was sent.
    form_class = VerifiedPasswordResetForm
    success_url = reverse_lazy("password_reset_done")
