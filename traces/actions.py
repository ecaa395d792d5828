from django.db import transaction
from django.utils import timezone

from .models import Task, TraceSession


@transaction.atomic
def report_outcome(session: TraceSession, outcome: str):
    """The latest report wins; a `fail` keeps the session's tasks out of training data."""
    TraceSession.objects.filter(pk=session.pk).update(outcome=outcome, outcome_at=timezone.now())
    Task.objects.filter(session=session).update(excluded_from_training=outcome == TraceSession.Outcome.FAIL)
    session.refresh_from_db()
