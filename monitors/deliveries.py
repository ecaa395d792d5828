"""Sending alerts: the signed webhook and the members' email, claimed in batches and retried with backoff.

Each minute's job claims the pending deliveries that are due (moving their
next attempt a lease ahead, so a second worker leaves them alone), sends the
webhooks side by side with a short timeout, and records each outcome: sent,
or tried again after 30 s, 1, 2, 4 and 8 minutes, then `failing`. A webhook
that hangs or answers 500 delays nothing but itself.

The webhook's body is Slack-compatible JSON (`text`, plus the alert's fields);
`Belvedir-Signature: t=<unix time>,v1=<hex>` is HMAC-SHA256 of
"<t>.<body>" under the monitor's signing secret (actions.webhook_secret), the
scheme Stripe uses, so a receiver checks both the body and its age.
"""

import asyncio
import hashlib
import hmac
import logging
import time
from datetime import timedelta

import aiohttp
import orjson
from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from belvedir.core.netpolicy import Refused, outbound_policy
from evals.outbound import PolicyResolver, check_literal

from .actions import webhook_secret
from .models import Alert, Delivery

logger = logging.getLogger(__name__)
MAX_ATTEMPTS = 6
FIRST_RETRY = timedelta(seconds=30)
# Longer than a batch can take (its emails one at a time, each within EMAIL_TIMEOUT): no second worker resends it.
LEASE = timedelta(minutes=30)
TIMEOUT_SECONDS = 10
BATCH = 100


def signature(secret: str, timestamp: int, body: bytes) -> str:
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def payload(delivery: Delivery) -> dict:
    alert = delivery.alert
    verb = "resolved" if delivery.event == "resolved" else alert.get_kind_display().lower()
    link = settings.BELVEDIR_BASE_URL + alert.get_absolute_url()
    text = f"[{verb}] {alert.title}" if delivery.event == "resolved" else f"{alert.title}\n{alert.message}"
    return {
        "text": text if delivery.event != "resolved" else f"{text}: a later run recovered. {link}",
        "event": delivery.event,
        "alert": {
            "id": alert.pk,
            "kind": alert.kind,
            "state": alert.state,
            "monitor": alert.monitor.name,
            "watches": alert.monitor.watched,
            "title": alert.title,
            "message": alert.message,
            "url": link,
            "opened_at": alert.opened_at.isoformat(),
        },
    }


def claim(now, batch: int = BATCH) -> list[Delivery]:
    with transaction.atomic():
        due = list(
            Delivery.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(state=Delivery.State.PENDING, next_attempt_at__lte=now)
            .select_related("alert__monitor__deployment", "alert__monitor__evaluator", "alert__project")[:batch]
        )
        Delivery.objects.filter(pk__in=[d.pk for d in due]).update(next_attempt_at=now + LEASE, attempts=F("attempts") + 1)
    for delivery in due:
        delivery.attempts += 1
    return due


def deliver_due(now=None) -> dict:
    """Scheduled every minute: send what is due; how many were sent and how many failed this time."""
    now = now or timezone.now()
    sent = failed = 0
    while due := claim(now):
        webhooks = [d for d in due if d.channel == Delivery.Channel.WEBHOOK]
        outcomes = dict(zip([d.pk for d in webhooks], asyncio.run(_post_all(webhooks)), strict=True))
        for delivery in due:
            error = outcomes[delivery.pk] if delivery.channel == Delivery.Channel.WEBHOOK else _email(delivery)
            _record(delivery, error, now)
            sent, failed = sent + (error is None), failed + (error is not None)
        if len(due) < BATCH:
            break
    return {"sent": sent, "failed": failed}


def _record(delivery: Delivery, error: str | None, now):
    if error is None:
        Delivery.objects.filter(pk=delivery.pk).update(state=Delivery.State.SENT, sent_at=timezone.now(), last_error="")
    elif delivery.attempts >= MAX_ATTEMPTS:
        Delivery.objects.filter(pk=delivery.pk).update(state=Delivery.State.FAILING, last_error=error[:500])
    else:
        wait = FIRST_RETRY * 2 ** (delivery.attempts - 1)
        Delivery.objects.filter(pk=delivery.pk).update(next_attempt_at=now + wait, last_error=error[:500])


async def _post_all(webhooks: list[Delivery]) -> list[str | None]:
    if not webhooks:
        return []
    connector = aiohttp.TCPConnector(resolver=PolicyResolver(outbound_policy()))
    timeout = aiohttp.ClientTimeout(total=TIMEOUT_SECONDS)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        found = await asyncio.gather(*(_post(session, d) for d in webhooks), return_exceptions=True)
    # Whatever one webhook raised is its own failure, recorded and retried; the others' outcomes stand.
    return [f"The webhook failed: {type(r).__name__}." if isinstance(r, BaseException) else r for r in found]


async def _post(session: aiohttp.ClientSession, delivery: Delivery) -> str | None:
    """None when the receiver answered 2xx; otherwise why not (never its body: it may echo anything)."""
    monitor = delivery.alert.monitor
    url = monitor.webhook_url
    if not url:
        return "The monitor has no webhook URL any more."
    body = orjson.dumps(payload(delivery))
    headers = {"Content-Type": "application/json", "Belvedir-Signature": signature(webhook_secret(monitor), int(time.time()), body)}
    try:
        check_literal(url, outbound_policy())
        async with session.post(url, data=body, headers=headers, allow_redirects=False) as response:
            if 200 <= response.status < 300:
                return None
            return f"The webhook answered HTTP {response.status}."
    except Refused as exc:
        return f"Refused: {exc}"
    except TimeoutError:
        return f"The webhook did not answer within {TIMEOUT_SECONDS} s."
    except aiohttp.ClientError as exc:
        return f"The webhook could not be reached: {type(exc).__name__}."


def _email(delivery: Delivery) -> str | None:
    alert: Alert = delivery.alert
    # Verified addresses only, as invitations and resets: an address someone merely typed is not told a project's news.
    members = alert.project.members.exclude(email="").filter(verified_email__email__iexact=F("email"))
    to = sorted(set(members.values_list("email", flat=True)))
    if not to:
        return None  # nobody verified to tell: the in-app list still shows it
    body = payload(delivery)
    subject = ("Resolved: " if delivery.event == "resolved" else "") + alert.title
    try:
        send_mail(subject[:200], body["text"] + "\n\n" + body["alert"]["url"], None, to)
    except Exception as exc:  # any backend's failure is a retry, not a lost alert
        return f"Email not sent: {type(exc).__name__}."
    return None
