import pytest

from belvedir.sandbox import scheduler
from belvedir.sandbox.errors import NoCapacity
from belvedir.sandbox.models import SandboxHost, SandboxLease
from belvedir.sandbox.owners import Owner

pytestmark = pytest.mark.django_db


def test_migrate_creates_the_default_local_cpu_host(settings):
    host = SandboxHost.objects.get(name="local")
    assert host.kind == "cpu" and host.accepting
    assert host.url == settings.SANDBOX_DOCKER_URL


def test_it_fills_capacity_then_says_busy():
    SandboxHost.objects.filter(name="local").update(capacity=2)
    scheduler.acquire_host(Owner("run", 1))
    scheduler.acquire_host(Owner("run", 2))
    with pytest.raises(NoCapacity, match="busy"):
        scheduler.acquire_host(Owner("run", 3))
    scheduler.release(Owner("run", 1))
    assert scheduler.acquire_host(Owner("run", 3)).host.name == "local"


def test_a_redelivered_owner_keeps_its_lease():
    first = scheduler.acquire_host(Owner("run", 1))
    assert scheduler.acquire_host(Owner("run", 1)).pk == first.pk
    assert SandboxLease.objects.count() == 1


def test_it_picks_the_least_loaded_host_and_skips_draining_ones():
    SandboxHost.objects.create(name="second", url="unix:///x.sock", capacity=4)
    SandboxHost.objects.create(name="draining", url="unix:///y.sock", capacity=4, draining=True)
    hosts = [scheduler.acquire_host(Owner("run", i)).host.name for i in range(4)]
    assert sorted(hosts) == ["local", "local", "second", "second"]


def test_no_host_of_the_kind_is_a_clear_error():
    with pytest.raises(NoCapacity, match="No enabled GPU sandbox host with A10G GPUs"):
        scheduler.acquire_host(Owner("run", 1), kind="gpu", gpu_type="A10G")


def test_gpu_runs_take_distinct_slots():
    SandboxHost.objects.create(name="gpu", url="unix:///g.sock", kind="gpu", gpu_type="A10G", gpu_count=2, capacity=8)
    slots = {scheduler.acquire_host(Owner("run", i), kind="gpu", gpu_type="A10G").gpu_slot for i in range(2)}
    assert slots == {0, 1}
    with pytest.raises(NoCapacity):
        scheduler.acquire_host(Owner("run", 9), kind="gpu", gpu_type="A10G")


def test_cpu_runs_never_land_on_gpu_hosts():
    SandboxHost.objects.filter(name="local").update(enabled=False)
    SandboxHost.objects.create(name="gpu", url="unix:///g.sock", kind="gpu", gpu_count=1)
    with pytest.raises(NoCapacity, match="No enabled CPU"):
        scheduler.acquire_host(Owner("run", 1))


def test_hosts_fill_in_proportion_to_their_free_places_and_unhealthy_ones_take_none():
    SandboxHost.objects.filter(name="local").update(capacity=2)
    SandboxHost.objects.create(name="big", url="unix:///b.sock", capacity=6)
    SandboxHost.objects.create(name="down", url="unix:///d.sock", capacity=50, healthy=False)
    first = [scheduler.acquire_host(Owner("run", i)).host.name for i in range(4)]
    assert first == ["big", "big", "big", "big"]  # 6 free beats 2 until they are level
    rest = [scheduler.acquire_host(Owner("run", i)).host.name for i in range(4, 8)]
    assert sorted(rest) == ["big", "big", "local", "local"]
    with pytest.raises(NoCapacity, match="busy"):
        scheduler.acquire_host(Owner("run", 8))
