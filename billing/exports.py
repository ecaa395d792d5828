from datetime import date, datetime, time

from django.utils import timezone

from belvedir.core.csvsafe import SafeWriter
from belvedir.core.money import plain_dollars


def write_coupons_csv(stream, coupons):
    writer = SafeWriter(stream)
    writer.writerow(["code", "amount_usd", "expires_at", "max_redemptions"])
    for coupon in coupons:
        writer.writerow([coupon.code, plain_dollars(coupon.amount_cents), coupon.expires_at.isoformat() if coupon.expires_at else "", coupon.max_redemptions])


def end_of_day(day: date) -> datetime:
    """A coupon "expiring on" a day stays valid through that whole day (UTC)."""
    return timezone.make_aware(datetime.combine(day, time.max))
