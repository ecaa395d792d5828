from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import UserCreationForm

from .models import ApiKey


class SignupForm(UserCreationForm):
    email = forms.EmailField(required=False)

    class Meta(UserCreationForm.Meta):
        model = get_user_model()
        fields = ("username", "email")


class ApiKeyForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What will use it, for example 'CI' or 'laptop'.")
    scope = forms.ChoiceField(choices=ApiKey.Scope.choices, initial=ApiKey.Scope.FULL)
