from belvedir.core.errors import TeamError
from belvedir.core.money import dollars


class BillingError(Exception):
    """A billing request that cannot be honoured; the message is shown to the user."""

    status_code = 400


class InsufficientBalance(BillingError):
    """Not enough funds for a charge, or (balance below zero) a debt to pay first."""

    status_code = 402

    def __init__(self, balance_cents: int, price_cents: int):
        self.balance_cents = balance_cents
        self.price_cents = price_cents
        if balance_cents < 0:
            then = f" (this one then needs {dollars(price_cents)})" if price_cents else ""
            message = (
                f"This project owes {dollars(-balance_cents)}: a top-up was refunded or disputed after its credit was spent. "
                f"Runs and evals are refused until the debt is paid{then}. "
                "Add funds or redeem a coupon on Settings → Balance: the next credit pays the debt first."
            )
        else:
            message = (
                f"Insufficient balance: {dollars(balance_cents)} available, {dollars(price_cents)} needed. Add funds or redeem a coupon on Settings → Balance."
            )
        super().__init__(message)

    @property
    def debt_cents(self) -> int:
        return max(0, -self.balance_cents)

    @property
    def response_fields(self) -> dict:
        fields = {"balance_cents": self.balance_cents, "price_cents": self.price_cents}
        return {**fields, "debt_cents": self.debt_cents} if self.debt_cents else fields


class CouponError(BillingError):
    pass


class TopUpError(BillingError):
    pass


class ProjectHoldsMoney(TeamError, BillingError):
    """Deleting a project refused for its account: a debt, or a balance the user has not been shown.

    A TeamError too, so the project's deletion pages (core) report it like
    their own refusals without importing billing.
    """

    status_code = 409

    def __init__(self, message):
        super().__init__(message, self.status_code)
