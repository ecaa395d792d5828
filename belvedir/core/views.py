from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from .actions import create_account
from .forms import ApiKeyForm, SignupForm
from .models import ApiKey


def signup(request):
    if request.user.is_authenticated:
        return redirect("home")
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = create_account(
            username=form.cleaned_data["username"],
            email=form.cleaned_data["email"],
            password=form.cleaned_data["password1"],
        )
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        messages.success(request, "Welcome to Belvedir. Your project is ready.")
        return redirect("home")
    return render(request, "registration/signup.html", {"form": form})


@login_required
def home(request):
    return render(request, "core/home.html")


@login_required
def settings_index(request):
    return render(request, "core/settings.html")


@login_required
def api_keys(request):
    keys = ApiKey.objects.for_user(request.user, request.project).filter(per_run=False).select_related("user")
    form = ApiKeyForm(request.POST or None)
    new_key = None
    if request.method == "POST" and form.is_valid():
        key, new_key = ApiKey.issue(
            project=request.project, user=request.user, name=form.cleaned_data["name"], scope=form.cleaned_data["scope"]
        )
        form = ApiKeyForm()
        # Rendered (not redirected) so the raw key is shown exactly once and never stored.
    return render(request, "core/api_keys.html", {"keys": keys, "form": form, "new_key": new_key})


@login_required
@require_POST
def revoke_api_key(request, pk):
    key = get_object_or_404(ApiKey.objects.for_user(request.user, request.project), pk=pk)
    key.revoke()
    messages.success(request, f"Key {key.prefix}… revoked. Requests with it now get 401.")
    return redirect("api_keys")
