from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes, throttle_classes
from rest_framework.response import Response

from belvedir.core.permissions import IsProjectOwner, request_project
from belvedir.core.throttle import CouponThrottle

from .actions import redeem_coupon
from .models import Account, LedgerEntry

RECENT_ENTRIES = 20


class LedgerEntrySerializer(serializers.ModelSerializer):
    class Meta:
        model = LedgerEntry
        fields = ["id", "kind", "amount_cents", "balance_after_cents", "reference", "memo", "created_at"]


class BalanceSerializer(serializers.Serializer):
    balance_cents = serializers.IntegerField()
    balance = serializers.CharField()
    entries = LedgerEntrySerializer(many=True)


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
    """The project's balance and its most recent ledger entries."""
    account = Account.for_project(request_project(request))
    entries = LedgerEntry.objects.filter(account=account)[:RECENT_ENTRIES]
    return Response(
        {
            "balance_cents": account.balance_cents,
            "balance": f"{account.balance_cents / 100:.2f}",
            "entries": LedgerEntrySerializer(entries, many=True).data,
        }
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
    return Response({"credited_cents": entry.amount_cents, "balance_cents": entry.balance_after_cents, "balance": f"{entry.balance_after_cents / 100:.2f}"})
