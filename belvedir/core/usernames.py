"""What a username may be: never an email address.

Invitations find a user by username or by email. A username shaped like an
email would let its holder answer for that address: someone who signed up as
`victim@example.test` was given the invitation meant for the account whose
email that is. With no `@` in usernames the two never meet.
"""

from django.core.exceptions import ValidationError

USERNAME_HELP = "150 characters or fewer: letters, digits and . + - _ only."


def validate_username(value: str):
    if "@" in value:
        raise ValidationError("A username cannot contain @ (it would look like an email address).", code="email_shaped")
