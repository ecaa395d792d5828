from django.core.exceptions import ValidationError
from rest_framework import serializers


def django_validator(validator):
    """Use a Django field validator in a DRF field: one rule, one message, pages and API alike."""

    def check(value):
        try:
            validator(value)
        except ValidationError as exc:
            raise serializers.ValidationError(exc.messages) from None

    return check
