"""Write-only secrets in forms and the API: a stored secret is shown as MASK, and MASK sent back means "keep it"."""

from belvedir.redaction import MASK


class MaskWithoutSecret(ValueError):
    """MASK sent where no secret is stored: it would otherwise become the value."""


def unmasked(value: str, stored: str | None, label: str = "") -> str:
    """The value a form or request means: MASK keeps the stored secret; MASK with none stored is refused."""
    if value.strip() != MASK:
        return value
    if not stored:
        raise MaskWithoutSecret(f"{label}: " * bool(label) + f"{MASK} is the mask of a stored secret, not a value.")
    return stored
