from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import UserCreationForm

from .models import ApiKey
from .usernames import USERNAME_HELP, validate_username


class SignupForm(UserCreationForm):
    email = forms.EmailField(required=False)

    class Meta(UserCreationForm.Meta):
        model = get_user_model()
        fields = ("username", "email")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["username"].help_text = USERNAME_HELP

    def clean_username(self):
        username = super().clean_username()
        validate_username(username)
        return username

    # No check that the address is free: saying so would tell anyone whether it
    # is registered. It is the account's only once verified (core.verification);
    # the owner of an address already verified is mailed instead.


class EmailForm(forms.Form):
    email = forms.EmailField(label="Email address", max_length=254)


class ApiKeyForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What will use it, for example 'CI' or 'laptop'.")
    scope = forms.ChoiceField(choices=ApiKey.Scope.choices, initial=ApiKey.Scope.FULL)


class SecretForm(forms.Form):
    name = forms.RegexField(
        regex=r"^[A-Za-z_][A-Za-z0-9_]*$",
        max_length=100,
        help_text="e.g. HF_TOKEN",
        error_messages={"invalid": "Letters, digits and _, not starting with a digit."},
    )
    value = forms.CharField(widget=forms.PasswordInput(render_value=False), help_text="Stored for runs; never shown again.")


class InviteForm(forms.Form):
    who = forms.CharField(label="Username or email", max_length=254)


class ProjectForm(forms.Form):
    name = forms.CharField(max_length=100)


def project_balance_cents(project) -> int:
    """The project's balance through the reverse accessor of billing's Account (core imports no app); 0 without one."""
    account = getattr(project, "account", None)
    return account.balance_cents if account is not None else 0


class DeleteProjectForm(forms.Form):
    confirm = forms.CharField(label="Type the project's name to confirm", max_length=100)
    # The balance the page showed: deletion forfeits exactly that, or is refused (it changed meanwhile).
    forfeit_cents = forms.IntegerField(required=False, min_value=0, widget=forms.HiddenInput)

    def __init__(self, *args, project=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.project = project
        self.balance_cents = project_balance_cents(project) if project is not None else 0
        self.debt_cents = max(-self.balance_cents, 0)
        self.fields["forfeit_cents"].initial = max(self.balance_cents, 0)

    def clean_confirm(self):
        if self.cleaned_data["confirm"] != self.project.name:
            raise forms.ValidationError("That is not the project's name.")
        return self.cleaned_data["confirm"]
