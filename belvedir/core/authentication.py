import re

from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from .models import KEY_PREFIX, ApiKey, Membership, hash_key

KEY_SHAPE = re.compile(re.escape(KEY_PREFIX) + r"[A-Za-z0-9_-]{32,}\Z")
# Writing last_used_at on every request would turn each read into a write;
# once a minute is plenty to tell a live key from a dead one.
LAST_USED_RESOLUTION_SECONDS = 60


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer bv_live_…`; sets request.auth to the ApiKey."""

    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, raw = header.partition(" ")
        if scheme.lower() != "bearer":
            return None
        raw = raw.strip()
        if not KEY_SHAPE.match(raw):
            raise exceptions.AuthenticationFailed("Malformed API key: expected 'bv_live_' followed by the key.")
        key = ApiKey.objects.select_related("user", "project").filter(key_hash=hash_key(raw)).first()
        if key is None:
            raise exceptions.AuthenticationFailed("Unknown API key.")
        if not key.is_active:
            raise exceptions.AuthenticationFailed("This API key has been revoked.")
        if not key.user.is_active:
            raise exceptions.AuthenticationFailed("The owner of this API key is disabled.")
        # Checked on every request, not only when a member is removed: a key
        # must never outlive its owner's place in the project, whichever way
        # the membership ended (removed, left, deleted in admin).
        if not Membership.objects.filter(project_id=key.project_id, user_id=key.user_id).exists():
            raise exceptions.AuthenticationFailed("The owner of this API key is no longer a member of its project.")
        now = timezone.now()
        if key.last_used_at is None or (now - key.last_used_at).total_seconds() > LAST_USED_RESOLUTION_SECONDS:
            ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        return key.user, key

    def authenticate_header(self, request):
        return self.keyword


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    """Tells drf-spectacular about the Bearer key, so /api/schema/ lists it
    and Swagger's Authorize button and generated clients can send one."""

    target_class = "belvedir.core.authentication.ApiKeyAuthentication"
    name = "ApiKeyAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "bearerFormat": "bv_live_…"}
