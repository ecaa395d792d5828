import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.db.models.functions import Lower
from django.utils import timezone

KEY_PREFIX = "bv_live_"
# 32 bytes of randomness is 43 url-safe characters; the brief asks for at least 32.
KEY_RANDOM_BYTES = 32
VISIBLE_PREFIX_LEN = len(KEY_PREFIX) + 6


class ProjectQuerySet(models.QuerySet):
    def for_user(self, user):
        return self.filter(memberships__user=user)


class Project(models.Model):
    name = models.CharField(max_length=100)
    created_at = models.DateTimeField(default=timezone.now)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, through="Membership", related_name="projects")

    objects = ProjectQuerySet.as_manager()

    class Meta:
        ordering = ["pk"]

    def __str__(self):
        return self.name

    def lock(self) -> "Project":
        """Lock this project's row for the rest of the transaction: actions that
        count the project's active work (to hold it to a limit) serialise here.

        FOR NO KEY UPDATE: trace workers holding the project (FOR KEY SHARE,
        traces.batches) go on storing its spans meanwhile."""
        return Project.objects.select_for_update(no_key=True).get(pk=self.pk)


class Membership(models.Model):
    class Role(models.TextChoices):
        OWNER = "owner"
        MEMBER = "member"
        # Reads everything of the project and labels review queues; changes nothing else (belvedir/core/reviewers.py).
        REVIEWER = "reviewer"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "user"], name="one_membership_per_user")]

    def __str__(self):
        return f"{self.user} in {self.project} ({self.role})"


class ProjectScopedQuerySet(models.QuerySet):
    """Base for every model a user reaches: the one query that scopes it.

    Dashboard views and API `get_queryset` both go through `for_user`, so an
    object of another project is simply not found (404), never leaked.
    """

    project_path = "project"

    def for_user(self, user, project=None):
        qs = self.filter(**{f"{self.project_path}__memberships__user": user})
        if project is not None:
            qs = qs.filter(**{self.project_path: project})
        return qs


def hash_key(raw: str) -> str:
    # Keys carry 256 bits of randomness, so a fast hash is enough: there is
    # nothing to brute-force, and lookups stay one indexed equality query.
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiKeyQuerySet(ProjectScopedQuerySet):
    def active(self):
        return self.filter(revoked_at__isnull=True)


class ApiKey(models.Model):
    class Scope(models.TextChoices):
        FULL = "full", "Full API"
        READ = "read", "Read only (every read of the API and the MCP server)"
        INGEST = "ingest", "Trace ingest only"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="api_keys")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100)
    scope = models.CharField(max_length=10, choices=Scope.choices, default=Scope.FULL)
    prefix = models.CharField(max_length=20, editable=False)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # Per-run keys are made and revoked by the platform, not listed on the keys page.
    per_run = models.BooleanField(default=False, editable=False)

    objects = ApiKeyQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"
        permissions = [("revoke_apikey", "Can revoke API keys")]

    def __str__(self):
        return f"{self.prefix}… ({self.name})"

    @classmethod
    def issue(cls, *, project, user, name, scope=Scope.FULL, per_run=False) -> tuple["ApiKey", str]:
        """Create a key; the raw key is returned once and never stored."""
        raw = KEY_PREFIX + secrets.token_urlsafe(KEY_RANDOM_BYTES)
        key = cls.objects.create(
            project=project,
            user=user,
            name=name,
            scope=scope,
            prefix=raw[:VISIBLE_PREFIX_LEN],
            key_hash=hash_key(raw),
            per_run=per_run,
        )
        return key, raw

    @property
    def is_active(self):
        return self.revoked_at is None

    def revoke(self):
        # A conditional update keeps the first revocation time when two race.
        ApiKey.objects.filter(pk=self.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.refresh_from_db(fields=["revoked_at"])


class ProjectSecret(models.Model):
    """A project-wide secret such as HF_TOKEN, given to runs that need it; never shown again."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="secrets")
    name = models.CharField(max_length=100)
    value = models.TextField()
    updated_at = models.DateTimeField(default=timezone.now)

    objects = ProjectScopedQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="one_secret_name_per_project")]

    def __str__(self):
        return self.name


class Invitation(models.Model):
    """An owner's invitation to join a project: a single-use link that expires.

    Only the token's hash is stored, like API keys: the link is shown to the
    owner once and works for the invited user alone.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="invitations")
    # Empty while an invitation by email waits for someone to verify that
    # address: the account that does is the one it goes to (actions.verify_email).
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField(blank=True, help_text="The address invited, when the owner invited by email.")
    invited_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    declined_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ProjectScopedQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"{self.user or self.email} to {self.project}"

    @property
    def waits_for_verification(self) -> bool:
        return self.user_id is None

    @property
    def is_pending(self):
        return not (self.accepted_at or self.declined_at or self.revoked_at) and self.expires_at > timezone.now()

    @property
    def state(self) -> str:
        if self.accepted_at:
            return "accepted"
        if self.declined_at:
            return "declined"
        if self.revoked_at:
            return "revoked"
        return "pending" if self.expires_at > timezone.now() else "expired"


class VerifiedEmail(models.Model):
    """The address a user proved they receive mail at, and when.

    A user's address is verified while `user.email` is still this address: an
    address changed anywhere (the settings page, admin) is unverified until its
    own link is followed, with no hook to forget. At most one account holds an
    address verified, so invitations and password resets to it have one owner.
    """

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="verified_email")
    email = models.EmailField()
    verified_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(Lower("email"), name="verified_email_unique_address")]

    def __str__(self):
        return f"{self.email} ({self.user})"


class RateCounter(models.Model):
    """One rate-limit window's count, when there is no Redis to INCR in.

    Increments are a single UPDATE ... SET count = count + 1 (row-locked),
    never a read followed by a write, so parallel attempts cannot overshoot.
    """

    key = models.CharField(max_length=255, unique=True)
    count = models.PositiveIntegerField(default=0)
    expires_at = models.DateTimeField(db_index=True)

    def __str__(self):
        return f"{self.key}: {self.count}"
