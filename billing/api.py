from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes, throttle_classes
from rest_framework.response import Response

from belvedir.core.money import plain_dollars
from belvedir.core.permissions import IsProjectOwner, request_project
from belvedir.core.throttle import CouponThrottle

from .actions import redeem_coupon
from .models import Account, LedgerEntry, TopUp

RECENT_ENTRIES = 20
RECENT_TOPUPS = 20


class LedgerEntrySerializer(serializers.ModelSerializer):
    class Meta:
        model = LedgerEntry
        fields = ["id", "kind", "amount_cents", "balance_after_cents", "reference", "memo", "topup", "created_at"]


class ReversalSerializer(serializers.ModelSerializer):
    class Meta:
        model = LedgerEntry
        fields = ["id", "kind", "amount_cents", "memo", "created_at"]


class TopUpSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    amount_cents = serializers.IntegerField()
    status = serializers.CharField()
    created_at = serializers.DateTimeField()
    reversals = ReversalSerializer(many=True, source="reversal_list", help_text="Refunds and disputes that took its credit back (or gave it back).")


class BalanceSerializer(serializers.Serializer):
    balance_cents = serializers.IntegerField(help_text="Negative when the project is in debt.")
    balance = serializers.CharField()
    debt_cents = serializers.IntegerField(help_text="What the project owes (0 unless a top-up was taken back after its credit was spent).")
    entries = LedgerEntrySerializer(many=True)
    topups = TopUpSerializer(many=True)


class RedeemSerializer(serializers.Serializer):
    code = serializers.CharField(max_length=60)


class RedeemResultSerializer(serializers.Serializer):
    credited_cents = serializers.IntegerField()
    balance_cents = serializers.IntegerField()
    balance = serializers.CharField()


@extend_schema(responses=BalanceSerializer)
@api_view(["GET"])
@permission_classes([IsProjectOwner])
def balance(request):
    """The project's balance, its most recent ledger entries, and its paid top-ups with their reversals."""
    account = Account.for_project(request_project(request))
    entries = LedgerEntry.objects.filter(account=account)[:RECENT_ENTRIES]
    body = {"balance_cents": account.balance_cents, "balance": plain_dollars(account.balance_cents), "debt_cents": account.debt_cents}
    return Response(
        BalanceSerializer({**body, "entries": entries, "topups": TopUp.objects.filter(account=account).paid_with_reversals()[:RECENT_TOPUPS]}).data,
    )


@extend_schema(request=RedeemSerializer, responses={200: RedeemResultSerializer})
@api_view(["POST"])
@permission_classes([IsProjectOwner])
@throttle_classes([CouponThrottle])
def redeem(request):
    """Redeem a coupon code for this project; 400 with the reason when it cannot be."""
    payload = RedeemSerializer(data=request.data)
    payload.is_valid(raise_exception=True)
    account = Account.for_project(request_project(request))
    entry = redeem_coupon(account, payload.validated_data["code"], request.user)
    return Response({"credited_cents": entry.amount_cents, "balance_cents": entry.balance_after_cents, "balance": plain_dollars(entry.balance_after_cents)})
