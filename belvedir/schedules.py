"""Every background job the platform runs on a clock, declared once.

`sync()` runs after every `migrate` (post_migrate, wired in core's AppConfig):
it makes django-q2's Schedule rows match this list, so changing a cadence or
adding a job is an edit here, never a data migration. Imported from
core's AppConfig.ready(), once the models are loaded. A schedule of the
project's own functions that is no longer declared is removed, so a job
retired here stops everywhere on the next deploy.
"""

import logging
from dataclasses import dataclass
from pathlib import Path

from django.apps import apps
from django.conf import settings
from django_q.models import Schedule

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Job:
    name: str
    func: str
    # django-q2's schedule types: "I" every `minutes`, "H" hourly.
    schedule_type: str = "I"
    minutes: int | None = 1


SCHEDULES = (
    Job("reap sandbox workloads", "belvedir.sandbox.reaper.reap"),
    Job("check sandbox hosts", "belvedir.sandbox.health.check_hosts"),
    Job("requeue lost runs", "harnesses.tasks.requeue_lost_runs"),
    Job("requeue lost evals", "evals.tasks.requeue_lost_evals"),
    Job("advance suite runs", "evals.suites.actions.advance_all"),
    Job("advance agent jobs", "agent_tasks.jobs.advance_all"),
    Job("advance regrades", "agent_tasks.regrades.advance_all"),
    Job("store pending trace batches", "traces.tasks.process_trace_batches"),
    Job("segment quiet trace sessions", "traces.tasks.process_sessions"),
    Job("retry evaluator errors", "traces.evaluators.retry_errors"),
    Job("run due monitors", "monitors.runs.tick"),
    Job("deliver alerts", "monitors.deliveries.deliver_due"),
    Job("trace partitions and retention", "traces.tasks.maintain_trace_partitions", schedule_type="H", minutes=None),
)


def own_packages() -> tuple[str, ...]:
    """The project's own apps (those under BASE_DIR), whose schedules this module owns."""
    base = Path(settings.BASE_DIR).resolve()
    return tuple(config.name + "." for config in apps.get_app_configs() if Path(config.path).resolve().is_relative_to(base))


def sync(**kwargs) -> None:
    for job in SCHEDULES:
        Schedule.objects.update_or_create(name=job.name, defaults={"func": job.func, "schedule_type": job.schedule_type, "minutes": job.minutes, "repeats": -1})
    declared = {job.name for job in SCHEDULES}
    for stale in Schedule.objects.exclude(name__in=declared):
        if stale.func.startswith(own_packages()):
            logger.info("Removing the schedule %r (%s): it is no longer declared in belvedir/schedules.py", stale.name, stale.func)
            stale.delete()
