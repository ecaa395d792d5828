"""How many errors a piece of work may lose before it ends failed: one rule for evals, harness runs and jobs.

A score of the rows (tasks, trials) that answered is not the score of those it was asked for: past a share of errors
the work says so in its status, not only in a count beside a green badge.
"""

from django.conf import settings
from django.db.models import F, Q


def too_many(errors: int, done: int) -> bool:
    """Every one of them errored, or more than MAX_ERROR_FRACTION of them."""
    return errors > 0 and (errors >= done or errors > done * settings.MAX_ERROR_FRACTION)


def too_many_q(errors: str, done: str) -> Q:
    """The same rule over two counter fields, for an update that ends the work where it holds."""
    return Q(**{f"{errors}__gt": 0}) & (Q(**{f"{errors}__gte": F(done)}) | Q(**{f"{errors}__gt": F(done) * settings.MAX_ERROR_FRACTION}))


def allowance(errors: int, done: int) -> str:
    """What the rule allowed, for the message that says why the work failed."""
    if errors >= done:
        return "none may"
    return f"at most {settings.MAX_ERROR_FRACTION:.0%} may, BELVEDIR_MAX_ERROR_FRACTION"
