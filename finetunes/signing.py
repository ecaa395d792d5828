"""Short-lived adapter download URLs, bound to one model and one run."""

from django.conf import settings
from django.core import signing
from django.urls import reverse

SALT = "belvedir.adapter-download"


def _signer():
    return signing.TimestampSigner(salt=SALT)


def adapter_url(model, run) -> str:
    token = _signer().sign(f"{model.pk}:{run.pk}")
    path = reverse("models:adapter_download", args=[model.pk, run.pk, token])
    return settings.BELVEDIR_BASE_URL + path


def verify(model_id: int, run_id: int, token: str) -> bool:
    """True for an unexpired token made for exactly this model and run."""
    try:
        value = _signer().unsign(token, max_age=settings.MODEL_ADAPTER_URL_MAX_AGE)
    except signing.BadSignature:  # SignatureExpired is a BadSignature too
        return False
    return value == f"{model_id}:{run_id}"
