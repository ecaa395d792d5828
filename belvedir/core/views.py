from django.contrib import admin, messages
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import REDIRECT_FIELD_NAME, login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from .actions import create_account, save_secret
from .decorators import owner_required
from .email_views import check_inbox, send_verification
from .forms import ApiKeyForm, SecretForm, SignupForm
from .models import ApiKey, Membership, ProjectSecret
from .scoping import get_scoped_or_404
from .throttle import allow_login_attempt

THROTTLED = "Too many login attempts. Wait a minute and try again."


def signup(request):
    if request.user.is_authenticated:
        return redirect("home")
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = create_account(
            username=form.cleaned_data["username"],
            email=form.cleaned_data["email"],
            password=form.cleaned_data["password1"],
            verified=False,
        )
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        # The same answer whether the address is new or another account's
        # (whose owner is mailed instead): sign-up tells nobody who is registered.
        send_verification(request, user)
        welcome = "Welcome to Belvedir. Your project is ready."
        messages.success(request, f"{welcome} {check_inbox(user.email)}" if user.email else welcome)
        return redirect("home")
    return render(request, "registration/signup.html", {"form": form})


@login_required
def settings_index(request):
    return render(request, "core/settings.html")


@login_required
def api_keys(request):
    keys = ApiKey.objects.for_user(request.user, request.project).filter(per_run=False).select_related("user")
    form = ApiKeyForm(request.POST or None)
    new_key = None
    if request.method == "POST" and form.is_valid():
        key, new_key = ApiKey.issue(project=request.project, user=request.user, name=form.cleaned_data["name"], scope=form.cleaned_data["scope"])
        form = ApiKeyForm()
        # Rendered (not redirected) so the raw key is shown exactly once and never stored.
    return render(request, "core/api_keys.html", {"keys": keys, "form": form, "new_key": new_key})


@login_required
@require_POST
def revoke_api_key(request, pk):
    keys = ApiKey.objects.for_user(request.user, request.project)
    if request.membership.role != Membership.Role.OWNER:
        keys = keys.filter(user=request.user)  # a member revokes their own keys; owners anyone's
    key = get_object_or_404(keys, pk=pk)
    key.revoke()
    messages.success(request, f"Key {key.prefix}… revoked. Requests with it now get 401.")
    return redirect("api_keys")


@login_required
@owner_required
def secrets(request):
    form = SecretForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        save_secret(request.project, form.cleaned_data["name"], form.cleaned_data["value"])
        messages.success(request, f"Secret {form.cleaned_data['name']} saved. Model benchmark runs receive HF_TOKEN.")
        return redirect("secrets")
    items = ProjectSecret.objects.for_user(request.user, request.project)
    return render(request, "core/secrets.html", {"form": form, "secrets": items})


@login_required
@owner_required
@require_POST
def delete_secret(request, pk):
    secret = get_scoped_or_404(request, ProjectSecret.objects.for_user(request.user, request.project), pk=pk)
    secret.delete()
    messages.success(request, f"Secret {secret.name} deleted.")
    return redirect("secrets")


class ThrottledLoginView(LoginView):
    """Django's login, with attempts limited per username and per address."""

    def post(self, request, *args, **kwargs):
        if not allow_login_attempt(request, request.POST.get("username", "")):
            # An unbound form: validating this one would try the password.
            context = self.get_context_data(form=self.form_class(request), throttled=THROTTLED)
            return self.render_to_response(context, status=429)
        return super().post(request, *args, **kwargs)


def admin_login(request):
    """The admin's login, under the same limit as /login/ and sharing its count:
    a staff password is the one most worth guessing, and alternating the two
    pages must not double the guesses."""
    if request.method == "POST" and not allow_login_attempt(request, request.POST.get("username", "")):
        messages.error(request, THROTTLED)
        context = {
            **admin.site.each_context(request),
            "title": "Log in",
            "app_path": request.get_full_path(),
            "form": AdminAuthenticationForm(request),  # unbound: validating it would try the password
            REDIRECT_FIELD_NAME: request.POST.get(REDIRECT_FIELD_NAME, ""),
        }
        return render(request, "admin/login.html", context, status=429)
    return admin.site.login(request)
