from datetime import date

from django.core.management.base import BaseCommand, CommandError

from belvedir.core.money import dollars
from billing.actions import create_coupon_batch, parse_dollars
from billing.errors import TopUpError
from billing.exports import end_of_day, write_coupons_csv


class Command(BaseCommand):
    help = "Create a batch of random coupon codes and print them as CSV."

    def add_arguments(self, parser):
        parser.add_argument("--amount", required=True, help="Dollars per code, e.g. 10.00")
        parser.add_argument("--count", type=int, default=1)
        parser.add_argument("--expires", help="Last valid day, YYYY-MM-DD (UTC, inclusive).")
        parser.add_argument("--limit", type=int, default=1, help="Redemptions per code (default 1).")
        parser.add_argument("--name", default="command line batch")

    def handle(self, *args, amount, count, expires, limit, name, **options):
        try:
            amount_cents = parse_dollars(amount)
        except TopUpError as exc:
            raise CommandError(str(exc)) from None
        expires_at = None
        if expires:
            try:
                expires_at = end_of_day(date.fromisoformat(expires))
            except ValueError:
                raise CommandError(f"--expires {expires!r} is not a date (YYYY-MM-DD).") from None
        if limit < 1:
            raise CommandError("--limit must be at least 1.")
        try:
            batch = create_coupon_batch(name=name, count=count, amount_cents=amount_cents, expires_at=expires_at, max_redemptions=limit)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        write_coupons_csv(self.stdout, batch.coupons.order_by("code"))
        self.stderr.write(f"{batch.count} codes of {dollars(amount_cents)} created (batch {batch.pk}).")
