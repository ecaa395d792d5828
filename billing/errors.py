class BillingError(Exception):
    """A billing request that cannot be honoured; the message is shown to the user."""

    status_code = 400


class InsufficientBalance(BillingError):
    status_code = 402

    def __init__(self, balance_cents: int, price_cents: int):
        self.balance_cents = balance_cents
        self.price_cents = price_cents
        super().__init__(
            f"Insufficient balance: ${balance_cents / 100:.2f} available, ${price_cents / 100:.2f} needed. Add funds or redeem a coupon on Settings → Balance."
        )

    @property
    def response_fields(self) -> dict:
        return {"balance_cents": self.balance_cents, "price_cents": self.price_cents}


class CouponError(BillingError):
    pass


class TopUpError(BillingError):
    pass
