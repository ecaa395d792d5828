"""Schedules come from belvedir/schedules.py, synced after migrate: no data migration changes a cadence."""

import dataclasses

import pytest
from django.core.management import call_command
from django_q.models import Schedule

from belvedir import schedules

pytestmark = pytest.mark.django_db


def rows() -> dict:
    return {s.name: (s.func, s.schedule_type, s.minutes) for s in Schedule.objects.all()}


def test_after_migrate_the_schedules_are_exactly_those_declared():
    assert rows() == {job.name: (job.func, job.schedule_type, job.minutes) for job in schedules.SCHEDULES}
    # Every declared job names a function that exists.
    for job in schedules.SCHEDULES:
        module, name = job.func.rsplit(".", 1)
        assert callable(getattr(__import__(module, fromlist=[name]), name)), job.func


def test_a_cadence_changed_in_the_module_is_synced_by_the_next_migrate(monkeypatch):
    first = schedules.SCHEDULES[0]
    monkeypatch.setattr(schedules, "SCHEDULES", (dataclasses.replace(first, minutes=5), *schedules.SCHEDULES[1:]))
    call_command("migrate", verbosity=0)
    assert Schedule.objects.get(name=first.name).minutes == 5
    assert Schedule.objects.filter(name=first.name).count() == 1


def test_a_retired_job_is_removed_and_an_operators_own_schedule_is_kept():
    Schedule.objects.create(name="reap harness runs", func="harnesses.tasks.reap_runs", schedule_type="I", minutes=1, repeats=-1)
    Schedule.objects.create(name="nightly report", func="reports.nightly.send", schedule_type="D", repeats=-1)
    schedules.sync()
    assert not Schedule.objects.filter(name="reap harness runs").exists()
    assert Schedule.objects.filter(name="nightly report").exists()
