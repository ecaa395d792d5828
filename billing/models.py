from django.conf import settings
from django.db import models
from django.utils import timezone

from belvedir.core.models import ProjectScopedQuerySet
from belvedir.core.money import plain_dollars


class AccountQuerySet(ProjectScopedQuerySet):
    pass


class Account(models.Model):
    """A project's prepaid balance. `balance_cents` caches the ledger's sum.

    Negative is a debt: a top-up taken back (refund, dispute) after its credit
    was spent. The ledger's `ledger_below_zero_only_by_reversal` says which
    entries may leave it there; runs and evals are refused meanwhile.

    Deleting the project detaches its account instead of deleting it: the
    money's history (ledger, top-ups, redemptions) outlives the project, and a
    late Stripe event for one of its top-ups still posts here.
    """

    project = models.OneToOneField("core.Project", null=True, blank=True, on_delete=models.SET_NULL, related_name="account")
    # Kept when the project goes, so the admin can still tell whose money this was.
    project_name = models.CharField(max_length=100, blank=True, help_text="The project's name when it was deleted.")
    detached_at = models.DateTimeField(null=True, blank=True, help_text="When its project was deleted.")
    balance_cents = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    objects = AccountQuerySet.as_manager()

    class Meta:
        permissions = [("grant_credit", "Can grant credit (adjust a balance)")]

    def __str__(self):
        owner = self.project if self.project_id else f"{self.project_name or 'project'} (deleted)"
        return f"{owner} ({plain_dollars(self.balance_cents)} USD)"

    @property
    def debt_cents(self) -> int:
        return max(0, -self.balance_cents)

    @classmethod
    def for_project(cls, project) -> "Account":
        return cls.objects.get_or_create(project=project)[0]

    @classmethod
    def balance_for(cls, project) -> int:
        return cls.objects.filter(project=project).values_list("balance_cents", flat=True).first() or 0


class LedgerEntryQuerySet(ProjectScopedQuerySet):
    project_path = "account__project"


class LedgerEntry(models.Model):
    """An append-only record of one balance change; never edited or deleted.

    The unique (kind, reference) constraint is what makes a charge, refund,
    redemption or Stripe credit happen at most once, even when requests race.
    """

    class Kind(models.TextChoices):
        TOPUP = "topup", "Top-up"
        COUPON = "coupon", "Coupon"
        RUN_CHARGE = "run_charge", "Run charge"
        REFUND = "refund", "Refund"
        ADJUSTMENT = "adjustment", "Adjustment"
        # Reversals of a top-up's credit, each tied to the top-up (`topup`):
        TOPUP_REFUND = "topup_refund", "Top-up refunded"
        DISPUTE = "dispute", "Top-up disputed"
        DISPUTE_WON = "dispute_won", "Dispute won"
        REFUND_FAILED = "refund_failed", "Refund failed"

    # The kinds Stripe moves without asking us, so they post even into debt.
    REVERSAL_KINDS = (Kind.TOPUP_REFUND, Kind.DISPUTE)
    TOPUP_REVERSAL_KINDS = (Kind.TOPUP_REFUND, Kind.DISPUTE, Kind.DISPUTE_WON, Kind.REFUND_FAILED)
    # A refund's credit taken back, net of refunds that failed (their credit given back).
    REFUND_KINDS = (Kind.TOPUP_REFUND, Kind.REFUND_FAILED)

    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="entries")
    topup = models.ForeignKey("TopUp", null=True, blank=True, on_delete=models.PROTECT, related_name="entries")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    amount_cents = models.BigIntegerField()
    balance_after_cents = models.BigIntegerField()
    reference = models.CharField(max_length=255)
    memo = models.CharField(max_length=500, blank=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    objects = LedgerEntryQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-pk"]
        verbose_name_plural = "ledger entries"
        constraints = [
            models.UniqueConstraint(fields=["kind", "reference"], name="ledger_once_per_kind_reference"),
            # A balance goes below zero only because Stripe took a top-up back;
            # a charge needs funds, and a credit into debt only makes it smaller.
            models.CheckConstraint(
                condition=models.Q(balance_after_cents__gte=0) | models.Q(amount_cents__gte=0) | models.Q(kind__in=["topup_refund", "dispute"]),
                name="ledger_below_zero_only_by_reversal",
            ),
        ]

    def __str__(self):
        return f"{self.kind} {self.amount_cents:+d}¢ ({self.reference})"

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise ValueError("Ledger entries are append-only.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ValueError("Ledger entries are append-only.")

    @property
    def debt_paid_cents(self) -> int:
        """How much of a credit went to paying the debt the balance was in."""
        before = self.balance_after_cents - self.amount_cents
        return min(self.amount_cents, -before) if self.amount_cents > 0 and before < 0 else 0


class Coupon(models.Model):
    code = models.CharField(max_length=40, unique=True, help_text="Stored upper-case; redemption ignores case and spaces.")
    amount_cents = models.PositiveIntegerField()
    expires_at = models.DateTimeField(null=True, blank=True)
    max_redemptions = models.PositiveIntegerField(default=1, help_text="Total redemptions across all accounts.")
    redemption_count = models.PositiveIntegerField(default=0, editable=False)
    batch = models.ForeignKey("CouponBatch", null=True, blank=True, on_delete=models.SET_NULL, related_name="coupons")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return self.code

    def save(self, *args, **kwargs):
        self.code = normalize_code(self.code)
        super().save(*args, **kwargs)


class CouponBatch(models.Model):
    name = models.CharField(max_length=100)
    count = models.PositiveIntegerField()
    amount_cents = models.PositiveIntegerField()
    expires_at = models.DateTimeField(null=True, blank=True)
    max_redemptions = models.PositiveIntegerField(default=1)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "coupon batches"

    def __str__(self):
        return f"{self.name} ({self.count} × {plain_dollars(self.amount_cents)})"


class CouponRedemption(models.Model):
    coupon = models.ForeignKey(Coupon, on_delete=models.PROTECT, related_name="redemptions")
    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="redemptions")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["coupon", "account"], name="one_redemption_per_account")]

    def __str__(self):
        return f"{self.coupon} by {self.account}"


class TopUpQuerySet(ProjectScopedQuerySet):
    project_path = "account__project"

    def paid_with_reversals(self):
        """Paid top-ups, newest first, each with `reversal_list`: the refunds and disputes beside it."""
        reversals = LedgerEntry.objects.filter(kind__in=LedgerEntry.TOPUP_REVERSAL_KINDS).order_by("created_at", "pk")
        return self.filter(status=TopUp.Status.PAID).prefetch_related(models.Prefetch("entries", queryset=reversals, to_attr="reversal_list"))


class TopUp(models.Model):
    """A Stripe Checkout Session we created; credited once Stripe says it is paid."""

    class Status(models.TextChoices):
        PENDING = "pending"
        PAID = "paid"

    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="topups")
    amount_cents = models.PositiveIntegerField()
    checkout_session_id = models.CharField(max_length=255, unique=True, null=True, blank=True)
    # Recorded from the paid Checkout Session: refunds and disputes name the payment intent, not the session.
    payment_intent_id = models.CharField(max_length=255, unique=True, null=True, blank=True)
    checkout_url = models.URLField(max_length=2000, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    objects = TopUpQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"#{self.pk} {plain_dollars(self.amount_cents)} for {self.account} ({self.status})"

    def reversals(self):
        """The ledger entries that took this top-up's credit back (or gave it back: a dispute won), oldest first."""
        return self.entries.filter(kind__in=LedgerEntry.TOPUP_REVERSAL_KINDS).order_by("created_at", "pk")


class StripeEvent(models.Model):
    """Every webhook event, once, by Stripe's event id."""

    event_id = models.CharField(max_length=255, unique=True)
    type = models.CharField(max_length=100)
    payload = models.JSONField()
    # What handling it did: credited, ignored, or why it was refused credit.
    outcome = models.CharField(max_length=200, blank=True)
    received_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-received_at"]

    def __str__(self):
        return f"{self.event_id} {self.type}"


def normalize_code(code: str) -> str:
    return "".join(str(code).split()).upper()
