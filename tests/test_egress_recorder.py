"""The egress recorder against grants replaced while it writes (PostgreSQL, two connections)."""

import threading

import pytest

from belvedir.sandbox.egress import issue_grant
from belvedir.sandbox.egress.recorder import Recorder
from belvedir.sandbox.models import EgressDestination, EgressGrant
from belvedir.sandbox.owners import Owner

from .concurrency import someone_waits_on_a_lock, start_thread
from .harness_fixtures import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_counts_of_a_grant_replaced_while_they_are_written_are_dropped_and_the_replacement_commits(monkeypatch):
    owner = Owner("run", "re-delivered")
    old, _ = issue_grant(owner)
    deleted, go = threading.Event(), threading.Event()
    create = EgressGrant.objects.create

    def create_after_the_recorder_has_started(**fields):
        # issue_grant has deleted the old grant (uncommitted) when it creates the new one.
        deleted.set()
        assert go.wait(30)
        return create(**fields)

    monkeypatch.setattr(EgressGrant.objects, "create", create_after_the_recorder_has_started)
    replacing = start_thread(issue_grant, owner)
    assert deleted.wait(30)

    writer_failed = []

    def write():
        try:
            # The recorder's write on its own connection, its thread not started
            # (its flush loop would write the same counts on its own schedule).
            Recorder._write(Recorder.__new__(Recorder), {(old.pk, "example.com", 443, ""): [1, 10, 20]}, set())
        except Exception as exc:  # noqa: BLE001 - the assertion below shows it
            writer_failed.append(exc)

    writing = start_thread(write)
    # The destination row's foreign key check waits on the grant being deleted.
    wait_for(someone_waits_on_a_lock, timeout=30, interval=0.05)
    go.set()
    replacing.join(30)
    writing.join(30)

    assert writer_failed == []
    new, _token = replacing.result
    assert list(EgressGrant.objects.values_list("pk", flat=True)) == [new.pk]
    assert not EgressDestination.objects.exists()
