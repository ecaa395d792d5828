"""A deployment's max_in_flight shared by every eval asking it at once, in whatever worker or host each runs.

Each eval's gate (concurrency.AdaptiveLimit) finds the level the deployment keeps up with; this module keeps
the sum of the gates under the deployment's cap, whether the evals are two suite runs, a suite and a lone
eval, or the local model's quick suite asked for twice. Every eval asking the deployment holds a share of
the cap on its row (Eval.in_flight_share) and settles it about once a second (the engine's flush), under a
lock on the deployment's row:

- Max-min fair: the cap is split evenly among the evals asking, and one wanting less (what its gate's level
  lets it test, or the most it had to send at once in the last second) leaves the rest to the others
  (water-filling). What none of them wants is there to take: an eval alone holds the whole cap.
- The shares never add up past the cap: a share grows only into what the others leave free, and shrinks no
  lower than what its eval has in flight (the gate stops sending at once; the share follows as answers
  return). An eval starting beside one holding the whole cap waits a second or so for it to make room.
- A share counts while its eval beats (heartbeat_at within EVAL_STALE_SECONDS), so a worker that died holds
  nothing for good; an eval gives its share back as its pass ends. The cap is read at every settle: a
  deployment's max_in_flight lowered mid-run holds within a second.

Why not a counter per request (Redis, a row): an eval sends hundreds of requests a second, and the embedded
setup has no Redis; a share settled once a second costs one small transaction per eval per second.
"""

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from .models import Deployment, Eval


def fair_shares(wants: list[int], cap: int) -> list[int]:
    """Max-min fair split of `cap` among `wants` (water-filling): no share above its want, the rest even, a
    remainder to the earlier of equal wants. With more evals asking than the cap, the earliest get 1 each and
    the latest wait for them to end: in turn, as a queue would."""
    shares = [0] * len(wants)
    left = cap
    # Equal wants latest first: each takes the even part rounded down, so what is left over goes to the earliest.
    order = sorted(range(len(wants)), key=lambda i: (wants[i], -i))
    for taken, index in enumerate(order):
        shares[index] = min(wants[index], left // (len(wants) - taken))
        left -= shares[index]
    return shares


def settle(ev: Eval, *, wanted: int, held: int) -> int:
    """Store the eval's share of its deployment's cap and its want; the level its gate may allow now.

    The stored share is at least `held` (what the gate has out, or may send before the share it is given is set:
    they count against the cap until they return); the level returned may be lower, and the gate then sends
    nothing until its answers bring it down.
    """
    now = timezone.now()
    with transaction.atomic():
        # One settle at a time per deployment: each reads the others' shares and writes its own.
        cap = Deployment.objects.select_for_update().values_list("max_in_flight", flat=True).get(pk=ev.deployment_id)
        cap = min(cap, settings.EVAL_MAX_IN_FLIGHT)
        others = list(holding(ev.deployment_id, now).exclude(pk=ev.pk).values_list("pk", "in_flight_share", "in_flight_wanted"))
        # In the order of their ids, whoever settles: a split each eval computes alike adds up to the cap, where
        # ties broken in the settling eval's favour would have two take the larger piece and a third wait for good.
        asking = sorted([(pk, want) for pk, _, want in others] + [(ev.pk, wanted)])
        split = fair_shares([want for _, want in asking], cap)
        # What no eval wants is this one's to take too: an eval alone keeps the whole cap, however little it has waiting.
        fair = split[asking.index((ev.pk, wanted))] + cap - sum(split)
        allowed = max(0, min(fair, cap - sum(share for _, share, _ in others)))
        Eval.objects.filter(pk=ev.pk).update(in_flight_share=max(allowed, held), in_flight_wanted=wanted)
    return allowed


def holding(deployment_id: int, now=None):
    """The evals whose shares count against the deployment's cap: asking it, and beating."""
    alive = (now or timezone.now()) - timedelta(seconds=settings.EVAL_STALE_SECONDS)
    return Eval.objects.filter(deployment_id=deployment_id, status=Eval.Status.RUNNING, in_flight_wanted__gt=0, heartbeat_at__gte=alive)


def release(ev: Eval):
    """The eval's pass ended with nothing in flight: its share is the others'."""
    Eval.objects.filter(pk=ev.pk).update(in_flight_share=0, in_flight_wanted=0)
