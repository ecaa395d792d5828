class BillingError(Exception):
    """A billing request that cannot be honoured; the message is shown to the user."""


class InsufficientBalance(BillingError):
    def __init__(self, balance_cents: int, price_cents: int):
        self.balance_cents = balance_cents
        self.price_cents = price_cents
        super().__init__(
            f"Insufficient balance: ${balance_cents / 100:.2f} available, ${price_cents / 100:.2f} needed. "
            "Add funds or redeem a coupon on Settings → Balance."
        )


class CouponError(BillingError):
    pass


class TopUpError(BillingError):
    pass
