from django import forms
from django.conf import settings

from .actions import parse_dollars
from .errors import TopUpError


class RedeemForm(forms.Form):
    code = forms.CharField(max_length=60, label="Coupon code")


class TopUpForm(forms.Form):
    amount = forms.CharField(label="Amount (USD)", help_text="Between $5 and $1,000.")

    def clean_amount(self):
        try:
            return parse_dollars(self.cleaned_data["amount"], minimum_cents=settings.TOPUP_MIN_CENTS, maximum_cents=settings.TOPUP_MAX_CENTS)
        except TopUpError as exc:
            raise forms.ValidationError(str(exc)) from None


class GrantCreditForm(forms.Form):
    amount = forms.CharField(label="Amount (USD, negative to debit)")
    memo = forms.CharField(max_length=500, help_text="Why: shown in the ledger.")

    def clean_amount(self):
        raw = self.cleaned_data["amount"].strip()
        negative = raw.startswith("-")
        try:
            cents = parse_dollars(raw.lstrip("-"), maximum_cents=10_000_000)
        except TopUpError as exc:
            raise forms.ValidationError(str(exc)) from None
        return -cents if negative else cents
