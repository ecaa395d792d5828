"""The response cache: an identical request is paid once, any change is a miss, and nothing crosses projects."""

import asyncio
import copy
import json
import random
from datetime import timedelta
from decimal import Decimal

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from billing.models import LedgerEntry
from evals import response_cache
from evals.actions import EvalConfigError, create_eval
from evals.client import Request
from evals.models import CachedResponse, CacheMode, Deployment, Eval, Sample
from evals.response_cache import ResponseCache, evict, key_of
from evals.tasks import run_eval

from .fakes.openai_server import FakeOpenAI
from .test_evals import right_answer

# Evals run their ORM calls in a thread of their own: what the test made must be committed for it to see.
pytestmark = [pytest.mark.usefixtures("loopback_deployments"), pytest.mark.django_db(transaction=True)]


@pytest.fixture
def fake():
    with FakeOpenAI(answer=right_answer) as server:
        yield server


@pytest.fixture
def deployment(project, fake):
    return Deployment.objects.create(
        project=project, name="fake", base_url=fake.url, model="fake-model", input_price_per_million=Decimal("1"), output_price_per_million=Decimal("2")
    )


def gsm8k_eval(project, owner, deployment, **options):
    ev = create_eval(project, owner, deployment=deployment, benchmark="gsm8k", sample_limit=20, seed=7, **options)
    run_eval(ev.pk)
    ev.refresh_from_db()
    return ev


def completions(fake) -> int:
    return sum(1 for r in fake.requests if r["path"].endswith("completions"))


def test_an_identical_rerun_asks_nothing_and_costs_nothing(project, owner, fake, deployment):
    first = gsm8k_eval(project, owner, deployment)
    assert (first.status, first.done_count, first.cache_hits, first.cache_misses) == ("succeeded", 20, 0, 20)
    assert first.cost > 0 and completions(fake) == 20
    ledger = LedgerEntry.objects.count()

    again = gsm8k_eval(project, owner, deployment)
    assert completions(fake) == 20, "the re-run sent a request"
    assert (again.status, again.done_count, again.score, again.cache_hits, again.cache_misses) == ("succeeded", 20, first.score, 20, 0)
    # A hit is no token spent: the eval's cost is $0, and no ledger entry was made for it.
    assert (again.prompt_tokens, again.completion_tokens, again.cost) == (0, 0, Decimal(0))
    assert LedgerEntry.objects.count() == ledger
    assert set(Sample.objects.filter(eval=again).values_list("cache_hits", "latency_ms", "prompt_tokens")) == {(1, None, None)}
    assert set(CachedResponse.objects.values_list("hits", flat=True)) == {1}


def test_a_deployment_with_another_key_is_another_source_and_is_not_served_the_firsts_answers(project, owner, fake, deployment):
    """A gateway's virtual key picks the backend behind one URL: the key is part of what answered."""
    gsm8k_eval(project, owner, deployment)
    other = Deployment.objects.create(project=project, name="other-key", base_url=fake.url, model="fake-model", api_key="vk-another-backend")
    fresh = gsm8k_eval(project, owner, other)
    assert (fresh.cache_hits, fresh.cache_misses) == (0, 20) and completions(fake) == 40
    assert "vk-another-backend" not in "".join(CachedResponse.objects.values_list("key", flat=True))  # a digest, never the key


def test_clearing_either_of_two_deployments_of_one_source_clears_what_both_are_served(project, owner, fake, deployment, owner_client):
    twin = Deployment.objects.create(project=project, name="twin", base_url=fake.url, model="fake-model")
    gsm8k_eval(project, owner, deployment)
    assert gsm8k_eval(project, owner, twin).cache_hits == 20  # the same URL, model and key: served the first's answers
    page = owner_client.get("/evals/deployments/").content.decode()
    assert "shared with twin (same URL, model and key)" in page and "shared with fake" in page
    owner_client.post(f"/evals/deployments/{twin.pk}/clear-cache/")  # the answers were written by `deployment`
    assert not CachedResponse.objects.exists()
    again = gsm8k_eval(project, owner, twin)
    assert (again.cache_hits, again.cache_misses) == (0, 20) and completions(fake) == 40


def test_bypass_asks_again_and_keeps_the_fresh_answers(project, owner, fake, deployment):
    gsm8k_eval(project, owner, deployment)
    fake.answer = lambda question: "#### 0"
    bypassed = gsm8k_eval(project, owner, deployment, cache=CacheMode.BYPASS)
    assert completions(fake) == 40 and (bypassed.cache_hits, bypassed.cache_misses) == (0, 20)
    # The fresh (wrong) answers replaced the kept ones: the next ordinary run is served them.
    served = gsm8k_eval(project, owner, deployment)
    assert completions(fake) == 40 and served.cache_hits == 20 and served.score == bypassed.score == 0


def test_sampled_requests_without_a_seed_are_not_cached_unless_asked(project, owner, fake, deployment):
    sampled = {"temperature": 0.7}
    gsm8k_eval(project, owner, deployment, generation=sampled)
    gsm8k_eval(project, owner, deployment, generation=sampled)
    assert completions(fake) == 40 and not CachedResponse.objects.exists()
    # With a seed the answers are meant to repeat; with "always" the user asks for it.
    gsm8k_eval(project, owner, deployment, generation={**sampled, "seed": 3})
    assert gsm8k_eval(project, owner, deployment, generation={**sampled, "seed": 3}).cache_hits == 20
    gsm8k_eval(project, owner, deployment, generation=sampled, cache=CacheMode.ALWAYS)
    assert gsm8k_eval(project, owner, deployment, generation=sampled, cache=CacheMode.ALWAYS).cache_hits == 20
    assert completions(fake) == 80


def test_no_answer_crosses_projects_and_a_deleted_deployment_takes_its_answers(project, owner, outsider, outsider_project, fake, deployment):
    gsm8k_eval(project, owner, deployment)
    # The same server and model, in another project: every request is its own.
    theirs = Deployment.objects.create(project=outsider_project, name="fake", base_url=fake.url, model="fake-model")
    other = gsm8k_eval(outsider_project, outsider, theirs)
    assert (other.cache_hits, other.cache_misses) == (0, 20) and completions(fake) == 40
    # A deployment moved to the other project leaves its answers behind.
    Deployment.objects.filter(pk=deployment.pk).update(project=outsider_project, name="moved")
    assert CachedResponse.objects.filter(deployment=deployment, project=project).count() == 20
    Eval.objects.filter(deployment=deployment).delete()  # evals protect their deployment
    deployment.delete()
    assert not CachedResponse.objects.filter(project=project).exists()


def test_answers_past_the_time_to_live_are_misses_and_evicted(project, owner, fake, deployment):
    gsm8k_eval(project, owner, deployment)
    CachedResponse.objects.update(created_at=timezone.now() - timedelta(days=8))
    assert gsm8k_eval(project, owner, deployment).cache_misses == 20  # the default: 7 days
    # The fresh answers replaced them; a shorter time to live makes those stale too, and eviction removes them.
    Deployment.objects.filter(pk=deployment.pk).update(cache_ttl_seconds=60)
    CachedResponse.objects.update(created_at=timezone.now() - timedelta(minutes=2))
    assert evict(project.pk) == 20 and not CachedResponse.objects.exists()


def test_a_time_to_live_of_zero_caches_nothing(project, owner, fake, deployment):
    Deployment.objects.filter(pk=deployment.pk).update(cache_ttl_seconds=0)
    deployment.refresh_from_db()
    gsm8k_eval(project, owner, deployment)
    assert gsm8k_eval(project, owner, deployment).cache_hits == 0
    assert completions(fake) == 40 and not CachedResponse.objects.exists()


def test_a_changed_model_behind_the_same_name_is_a_miss(project, owner, fake, deployment):
    fake.models = [{"id": "fake-model", "root": "/weights/v1", "max_model_len": 4096}]
    fake.system_fingerprint = "fp_1"
    gsm8k_eval(project, owner, deployment)
    assert gsm8k_eval(project, owner, deployment).cache_hits == 20
    # The server lists other weights under the model's name: every key changes.
    fake.models = [{"id": "fake-model", "root": "/weights/v2", "max_model_len": 4096}]
    assert gsm8k_eval(project, owner, deployment).cache_hits == 0
    # Its answers carry another system_fingerprint: once one says so, the others kept are not served.
    fake.system_fingerprint = "fp_2"
    CachedResponse.objects.all().delete()
    Deployment.objects.filter(pk=deployment.pk).update(served_fingerprint="")
    gsm8k_eval(project, owner, deployment)
    deployment.refresh_from_db()
    assert response_cache.served_parts(deployment.served_fingerprint)[1] == "fp_2"
    CachedResponse.objects.update(system_fingerprint="fp_1")
    assert gsm8k_eval(project, owner, deployment).cache_hits == 0


def test_each_part_of_the_key_changes_it(deployment):
    request = Request("/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0})
    base = key_of(deployment, request, 0)
    changed = [
        key_of(Deployment(base_url=deployment.base_url + "/other", model=deployment.model), request, 0),
        key_of(Deployment(base_url=deployment.base_url, model="another"), request, 0),
        key_of(deployment, request, 0, fingerprint="models:abc"),
        key_of(deployment, Request("/completions", request.payload), 0),
        key_of(deployment, Request(request.path, {**request.payload, "seed": 1}), 0),
        key_of(deployment, request, 1),
    ]
    assert len({key.hash for key in [base, *changed]}) == len(changed) + 1
    # What asks the same is the same key: a trailing slash, key order, 0 written as 0.0.
    same = Request(request.path, {"temperature": 0.0, "messages": request.payload["messages"], "model": "m"})
    assert key_of(Deployment(base_url=deployment.base_url + "/", model=deployment.model, served_fingerprint=deployment.served_fingerprint), same, 0) == base


SETTINGS = {
    "temperature": lambda r: r.choice([0, 0.1, 0.5, 1]),
    "top_p": lambda r: r.choice([0.5, 0.9, 0.95, 1]),
    "max_tokens": lambda r: r.randint(1, 4096),
    "stop": lambda r: r.choice([["\n"], ["###"], ["\n\n", "Q:"], []]),
    "seed": lambda r: r.randint(0, 10**6),
    "presence_penalty": lambda r: r.choice([0, 0.5, 1]),
    "frequency_penalty": lambda r: r.choice([0, 0.5, 1]),
    "n": lambda r: r.randint(1, 3),
    "logprobs": lambda r: r.choice([True, False]),
    "tools": lambda r: r.choice([[], [{"type": "function", "function": {"name": "f", "parameters": {}}}]]),
}


def canonical(value) -> str:
    """The test's own canonical form of a request: JSON with sorted keys, an integral float as its integer (what
    asks the same, 0 and 0.0, is the same; anything else differs)."""

    def cast(item):
        if isinstance(item, float) and item.is_integer():
            return int(item)
        if isinstance(item, dict):
            return {key: cast(child) for key, child in item.items()}
        if isinstance(item, list):
            return [cast(child) for child in item]
        return item

    return json.dumps(cast(value), sort_keys=True)


def look_up(cache: ResponseCache, keys: list) -> list:
    """Every key looked up at once, as the engine's rows do; the lookups' ORM thread closes its connection after."""

    async def all_at_once():
        try:
            return await asyncio.gather(*(cache.lookup(key) for key in keys))
        finally:
            await sync_to_async(lambda: connection.close())()  # looked up there: that thread's connection

    return asyncio.run(all_at_once())


def test_two_thousand_random_changes_to_the_request_are_all_misses(project, deployment):
    """Property: a request differing from the kept one in any setting, message or attempt is never served its answer."""
    rng = random.Random(20261205)
    base = {
        "model": "fake-model",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}],
        "temperature": 0,
        "max_tokens": 64,
    }
    cache = ResponseCache(project.pk, deployment, CacheMode.ALWAYS)
    cache.keep(key_of(deployment, Request("/chat/completions", base), 0), b'{"choices": [{"message": {"content": "4"}}]}')
    cache.write(eval_id=0)

    variants, changed = [], dict.fromkeys(SETTINGS, 0)
    while len(variants) < 2000:
        payload, attempt = copy.deepcopy(base), 0
        for _ in range(rng.randint(1, 3)):
            change = rng.randrange(4)
            if change == 0:
                name = rng.choice(list(SETTINGS))
                payload[name] = SETTINGS[name](rng)
            elif change == 1:
                message = rng.choice(payload["messages"])
                message["content"] += rng.choice([" ", ".", "!", " please", "\n"])
            elif change == 2:
                payload["messages"].append({"role": rng.choice(["assistant", "user"]), "content": str(rng.random())})
            else:
                attempt = rng.randint(1, 9)
        # "Changed" by the test's own reading of a request, not the code under test's: a normaliser that merged two
        # settings (0.5 read as 0) must not be able to drop the variants that would catch it.
        if canonical(payload) != canonical(base) or attempt:
            variants.append(key_of(deployment, Request("/chat/completions", payload), attempt))
            for name in SETTINGS:
                changed[name] += canonical(payload.get(name)) != canonical(base.get(name))
    assert min(changed.values()) >= 50, changed  # every setting is tried, often

    *answers, original = look_up(cache, [*variants, key_of(deployment, Request("/chat/completions", base), 0)])
    assert sum(answer is not None for answer in answers) == 0
    assert original is not None, "the unchanged request must still be a hit, or the misses prove nothing"


def test_a_hash_collision_is_a_miss_not_another_requests_answer(project, deployment, monkeypatch):
    cache = ResponseCache(project.pk, deployment, CacheMode.AUTO)
    kept = key_of(deployment, Request("/chat/completions", {"temperature": 0, "messages": [{"role": "user", "content": "a"}]}), 0)
    cache.keep(kept, b"answer to a")
    cache.write(eval_id=0)
    other = key_of(deployment, Request("/chat/completions", {"temperature": 0, "messages": [{"role": "user", "content": "b"}]}), 0)
    forged = response_cache.Key(other.text, kept.hash)  # another request under the same hash

    assert look_up(cache, [forged, kept]) == [None, b"answer to a"]


def test_an_unknown_cache_mode_is_refused(project, owner, deployment):
    with pytest.raises(EvalConfigError, match="cache must be one of"):
        create_eval(project, owner, deployment=deployment, benchmark="gsm8k", sample_limit=2, cache="sometimes")


def test_the_command_lists_and_clears_a_projects_answers(project, owner, fake, deployment, capsys):
    gsm8k_eval(project, owner, deployment)
    call_command("response_cache", "stats")
    out = capsys.readouterr().out
    assert f"project {project.pk}" in out and "20 answers" in out
    call_command("response_cache", "clear", "--deployment", str(deployment.pk))
    assert not CachedResponse.objects.exists()
    assert "Removed 20 cached answers" in capsys.readouterr().out


def test_the_admin_lists_cached_answers(admin_client, project, owner, fake, deployment):
    gsm8k_eval(project, owner, deployment)
    page = admin_client.get("/admin/evals/cachedresponse/")
    assert page.status_code == 200 and b"fake" in page.content


def test_the_api_takes_the_cache_mode_and_answers_hits_and_misses(api, outsider_api, project, owner, fake, deployment):
    first = api.post("/api/v1/evals", {"benchmark": "gsm8k", "deployment": "fake", "sample_limit": 5, "seed": 3}, format="json")
    assert first.status_code == 201 and first.json()["cache"] == "auto"
    run_eval(first.json()["id"])
    refused = api.post("/api/v1/evals", {"benchmark": "gsm8k", "deployment": "fake", "sample_limit": 5, "cache": "sometimes"}, format="json")
    assert refused.status_code == 400 and "cache" in refused.json()
    again = api.post("/api/v1/evals", {"benchmark": "gsm8k", "deployment": "fake", "sample_limit": 5, "seed": 3}, format="json").json()
    run_eval(again["id"])
    shown = api.get(f"/api/v1/evals/{again['id']}").json()
    assert (shown["cache_hits"], shown["cache_misses"]) == (5, 0)
    assert {s["cache_hits"] for s in api.get(f"/api/v1/evals/{again['id']}/samples").json()["results"]} == {1}
    # Clearing a deployment's answers: its own project only.
    assert outsider_api.post(f"/api/v1/deployments/{deployment.pk}/clear-cache").status_code == 404
    assert CachedResponse.objects.count() == 5
    assert api.post(f"/api/v1/deployments/{deployment.pk}/clear-cache").json() == {"id": deployment.pk, "removed": 5}
    assert api.get("/api/v1/deployments").json()[0]["cache_ttl_seconds"] == 7 * 24 * 3600


def test_the_pages_show_hits_explain_what_is_not_cached_and_clear_a_deployment(owner_client, project, owner, fake, deployment):
    gsm8k_eval(project, owner, deployment)
    again = gsm8k_eval(project, owner, deployment)
    page = owner_client.get(f"/evals/{again.pk}/").content.decode()
    assert "<strong>20</strong> requests answered from it" in page and "<strong>0</strong> sent" in page
    sampled = gsm8k_eval(project, owner, deployment, generation={"temperature": 0.8})
    assert "without a seed are not cached" in owner_client.get(f"/evals/{sampled.pk}/").content.decode()
    listing = owner_client.get("/evals/deployments/").content.decode()
    assert "20 answers, kept 7 days" in listing
    owner_client.post(f"/evals/deployments/{deployment.pk}/clear-cache/")
    assert not CachedResponse.objects.exists()


def test_the_cli_bypasses_the_cache_and_clears_a_deployment(live_server, api_key, project, fake, deployment, tmp_path, monkeypatch):
    from click.testing import CliRunner

    from belvedir_cli.main import cli

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))

    def bv(*args):
        return CliRunner().invoke(cli, list(args), env={"BELVEDIR_API_KEY": api_key, "BELVEDIR_BASE_URL": live_server.url}, obj={})

    started = bv("evals", "run", "gsm8k", "--deployment", "fake", "--n", "3", "--cache", "bypass", "--json")
    assert started.exit_code == 0, started.output
    assert Eval.objects.get(pk=json.loads(started.stdout)["id"]).cache == CacheMode.BYPASS
    CachedResponse.objects.create(project=project, deployment=deployment, key_hash="0" * 64, key="{}", body=b"{}", size=4)
    cleared = bv("deployments", "clear-cache", str(deployment.pk), "--json")
    assert cleared.exit_code == 0 and json.loads(cleared.stdout)["removed"] == 1


def test_over_the_cap_the_least_recently_used_answers_go_first(project, deployment, settings):
    now = timezone.now()
    for i in range(6):
        # Six answers of 1,000 bytes: kept an hour apart; the oldest two were hit recently.
        CachedResponse.objects.create(
            project=project,
            deployment=deployment,
            key_hash=f"{i:064d}",
            key=str(i),
            body=b"x" * 999,
            size=1000,
            created_at=now - timedelta(hours=10 - i),
            last_hit_at=now - timedelta(minutes=5) if i < 2 else None,
        )
    settings.RESPONSE_CACHE_MAX_BYTES = 3500
    assert evict(project.pk) == 3
    # Kept: the two hit five minutes ago and the newest; gone: the three least recently used.
    assert sorted(CachedResponse.objects.values_list("key", flat=True)) == ["0", "1", "5"]
