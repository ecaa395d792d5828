"""launch: a workload's sandboxes, one or several, opened as a whole on one leased host, and moved as a whole off a silent one.

On fake hosts (belvedir/sandbox/backends/fake.py): what is tried here is
the door's own logic, which is the same whichever backend is behind it.
"""

import pytest

from belvedir.sandbox import backends, health, launch
from belvedir.sandbox.backends.fake import FakeBackend
from belvedir.sandbox.errors import BackendUnavailable, ImageMissing, LaunchFailed
from belvedir.sandbox.models import SandboxHost, SandboxLease, backend_choices
from belvedir.sandbox.owners import Owner
from belvedir.sandbox.spec import SandboxSpec

pytestmark = pytest.mark.django_db

OWNER = Owner("test", 7)


@pytest.fixture
def hosts():
    """Two fake hosts, `ghost` first in line (the most free places), and no other host enabled."""
    SandboxHost.objects.update(enabled=False)
    ghost = SandboxHost.objects.create(name="ghost", backend="fake", url="fake://ghost", capacity=50)
    steady = SandboxHost.objects.create(name="steady", backend="fake", url="fake://steady", capacity=4)
    return ghost, steady


def parts(placement, count=3, **kwargs) -> list[SandboxSpec]:
    return [SandboxSpec(owner=OWNER, runtime=placement.runtime, part=part, **kwargs) for part in range(count)]


def test_a_layout_opens_every_part_on_one_host_under_one_lease_and_gives_all_back(hosts):
    ghost, _ = hosts
    heard, made_for = [], []

    def specs_for(placement):
        made_for.append((placement.host.name, placement.runtime))
        return parts(placement)

    with launch.layout(OWNER, specs_for, on_lease=lambda lease: heard.append(lease.host.name)) as boxes:
        assert [box.spec.part for box in boxes] == [0, 1, 2]
        assert all(box.exec(["true"], timeout=30).exit_code == 0 for box in boxes)
        assert sorted(s.name for s in FakeBackend("fake://ghost").managed("test")) == sorted(box.spec.name for box in boxes)
        assert list(SandboxLease.objects.values_list("owner", "host__name")) == [("test:7", "ghost")]
    # The runtime the specs were made for is the host's, resolved by its backend.
    assert made_for == [("ghost", backends.for_host(ghost).runtime(ghost.runtime))] == [("ghost", "fake")]
    assert heard == ["ghost"]
    assert not SandboxLease.objects.exists() and FakeBackend("fake://ghost").managed() == []


def test_a_silent_engine_moves_the_whole_layout_to_another_host(hosts):
    ghost, steady = hosts
    FakeBackend("fake://ghost").stop()
    heard = []
    with launch.layout(OWNER, parts, on_lease=lambda lease: heard.append(lease.host.name)) as boxes:
        assert len(boxes) == 3
        assert len(FakeBackend("fake://steady").managed("test")) == 3
        assert list(SandboxLease.objects.values_list("host__name", flat=True)) == ["steady"]
    assert heard == ["ghost", "steady"]
    ghost.refresh_from_db()
    assert not ghost.healthy and "unreachable" in ghost.last_error
    assert not SandboxLease.objects.exists()


def test_with_no_other_host_the_launch_fails_as_the_platforms_fault_and_gives_its_place_back(hosts):
    ghost, steady = hosts
    SandboxHost.objects.filter(pk=steady.pk).update(enabled=False)
    FakeBackend("fake://ghost").stop()
    with pytest.raises(BackendUnavailable, match="No other host"):
        with launch.workload(OWNER, lambda placement: parts(placement, 1)[0]):
            pass
    assert not SandboxLease.objects.exists()


def test_when_one_part_cannot_start_none_is_left_and_the_host_stays_healthy(hosts):
    ghost, _ = hosts

    def third_missing(placement):
        specs = parts(placement)
        specs[2].image = "belvedir-no-such-image:latest"
        return specs

    with pytest.raises(ImageMissing):
        with launch.layout(OWNER, third_missing):
            pass
    assert FakeBackend("fake://ghost").managed() == []
    ghost.refresh_from_db()
    assert ghost.healthy  # an answering engine without an image is no reason to move
    assert not SandboxLease.objects.exists()


def test_a_fake_host_is_refused_where_settings_do_not_allow_the_fake(hosts, settings):
    ghost, _ = hosts
    settings.SANDBOX_ALLOW_FAKE_BACKEND = False
    with pytest.raises(LaunchFailed, match="not allowed"):
        backends.for_host(ghost)
    with pytest.raises(LaunchFailed, match="not allowed"):
        with launch.workload(OWNER, lambda placement: parts(placement, 1)[0]):
            pass
    assert not SandboxLease.objects.exists()
    assert list(dict(backend_choices())) == ["docker"]  # nor does the admin offer it
    # Its health check says why it takes no work, as for a host without the image.
    assert health.check_host(ghost) is False
    assert "not allowed" in SandboxHost.objects.get(pk=ghost.pk).last_error


def test_lease_less_sandboxes_open_side_by_side_and_close_together():
    backend = FakeBackend("fake://bench")
    specs = [SandboxSpec(owner=Owner("standalone", "bench"), runtime="auto", part=part) for part in range(4)]
    with launch.sandboxes(backend, specs) as boxes:
        assert len(backend.managed("standalone")) == 4
        assert {box.runtime for box in boxes} == {"fake"}
    assert backend.managed() == []


class Closing:
    """A sandbox whose end waits for its siblings' (a barrier of all of them): ended one after another, the first would
    wait alone and break the barrier."""

    def __init__(self, barrier, fails=False):
        self.barrier, self.fails, self.ended = barrier, fails, False

    def __exit__(self, *exc_info):
        self.barrier.wait()
        self.ended = True
        if self.fails:
            raise LaunchFailed("could not remove it")


def test_a_layouts_sandboxes_end_side_by_side_and_each_is_ended_though_one_fails():
    import threading

    barrier = threading.Barrier(3, timeout=10)
    boxes = [Closing(barrier, fails=True), Closing(barrier), Closing(barrier)]
    with pytest.raises(LaunchFailed, match="could not remove it"):
        launch.close(boxes)
    assert all(box.ended for box in boxes) and not barrier.broken
