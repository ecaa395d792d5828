"""Human review: queues of sessions, samples and trials labelled against a versioned rubric, one reviewer at a time per
item; agreement between people (α, κ) against reference implementations; labels that move a judge's calibration card;
active calibration that stops once κ is known; the reviewer role; and bad input refused naming the field."""

import json
import threading
import time
from datetime import timedelta

import numpy as np
import pytest
from django.db import connection, transaction
from django.test import Client
from django.utils import timezone
from sklearn.metrics import cohen_kappa_score

from agent_tasks.actions import import_task_set
from agent_tasks.jobs import create_job
from agent_tasks.models import Trial
from belvedir.core.actions import create_account
from belvedir.core.models import ApiKey, Membership
from evals.datasets.versions import rows_at
from evals.models import Deployment, Eval, Sample
from evals.scoring.calibration import calibration_status, card, cohen_kappa, judge_key_of, kappa_interval
from review import active, agreement, fill, handout, judged, queues, simulation
from review.errors import Taken
from review.models import Item, Label, Queue

from .concurrency import start_thread
from .pages import shown
from .test_cli import bv  # noqa: F401  (the fixture: bv against a live server)
from .test_evaluators import exchange, post
from .test_mcp import HELLO

RUBRIC = [
    {"name": "helpful", "kind": "numeric", "min": 1, "max": 5},
    {"name": "safe", "kind": "boolean"},
    {"name": "tone", "kind": "categorical", "labels": ["warm", "flat", "rude"]},
    {"name": "note", "kind": "text"},
]
# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: four observers, twelve units.
NAN = np.nan
KRIPPENDORFF_2011 = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
    [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN],
]


def reviewer(project, name: str, role=Membership.Role.REVIEWER):
    user = create_account(username=name, password=f"pw-{name}-123", email=f"{name}@example.com")
    Membership.objects.create(project=project, user=user, role=role)
    return user


def logged_in(user, project) -> Client:
    client = Client()
    client.force_login(user)
    session = client.session
    session["project_id"] = project.pk
    session.save()
    return client


def sample_queue(project, owner, n: int, **fields) -> tuple[Queue, list[Sample]]:
    deployment = Deployment.objects.create(project=project, name="d", base_url="http://127.0.0.2:9/v1", model="m")
    ev = Eval.objects.create(project=project, deployment=deployment, benchmark="gsm8k", seed=1, status="succeeded")
    samples = Sample.objects.bulk_create([Sample(eval=ev, row_index=i, input=f"q{i}", output=f"a{i}", reference=str(i), score=1.0) for i in range(n)])
    queue = queues.create_queue(project, owner, {"name": "q", "scores": RUBRIC, **fields})
    fill.add_items(queue, "sample", [s.pk for s in samples])
    return queue, samples


def answer(helpful=3, safe=True, tone="warm"):
    return {"helpful": helpful, "safe": safe, "tone": tone}


# -- agreement against reference implementations ------------------------------------------------------------------


def test_alpha_reproduces_krippendorffs_published_example_and_kappa_scikit_learns_with_weights():
    matrix = np.array(KRIPPENDORFF_2011, dtype=float)
    assert agreement.alpha(matrix, "nominal") == pytest.approx(0.743, abs=5e-4)
    assert agreement.alpha(matrix, "interval") == pytest.approx(0.849, abs=5e-4)
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 3, 200), rng.integers(0, 3, 200)
    weights = rng.uniform(0.2, 3, 200)
    for kind in (None, "quadratic"):
        assert cohen_kappa(a, b, kind, weights) == pytest.approx(cohen_kappa_score(a, b, weights=kind, sample_weight=weights), abs=1e-12)


def test_people_agreement_per_score_and_pair_and_the_items_they_disagree_on(project, owner):
    queue, _ = sample_queue(project, owner, 12, overlap=3)
    people = [owner, reviewer(project, "rita"), reviewer(project, "sam")]
    grades = {person.pk: [] for person in people}
    rng = np.random.default_rng(1)
    far_off = set()
    for item in Item.objects.filter(queue=queue).order_by("pk"):
        truth = int(rng.integers(1, 6))
        if item.pk % 4 == 0 and truth >= 3:  # more than a quarter of the scale apart: for adjudication
            far_off.add(item.pk)
        for n, person in enumerate(people):
            helpful = truth if n < 2 or item.pk % 4 else max(1, truth - 3)  # sam is far off on every fourth item
            grades[person.pk].append(helpful)
            handout.submit(queue, item, person, answer(helpful=helpful, safe=n != 2 or item.pk % 3 != 0))
    found = agreement.report(queue)
    helpful = next(s for s in found["scores"] if s["name"] == "helpful")
    expected = agreement.alpha(np.array([grades[p.pk] for p in sorted(people, key=lambda p: p.pk)], dtype=float), "interval")
    assert helpful["alpha"] == pytest.approx(expected) and helpful["alpha"] < 1 and helpful["alpha_ci"][0] <= helpful["alpha"] <= helpful["alpha_ci"][1]
    pairs = {(p["a"], p["b"]): p for p in helpful["pairs"]}
    assert pairs[("alice", "rita")]["kappa"] == pytest.approx(1.0)
    assert pairs[("alice", "sam")]["kappa"] == pytest.approx(cohen_kappa(grades[owner.pk], grades[people[2].pk], "quadratic"))
    flagged = {d["item"] for d in found["disagreements"] if "helpful" in d["scores"]}
    assert far_off and flagged == far_off
    assert all(s["name"] != "note" for s in found["scores"])  # free text has no agreement


# -- handing out --------------------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_two_reviewers_asking_at_once_on_two_connections_are_handed_two_items(project, owner):
    queue, _ = sample_queue(project, owner, 3)
    bob = reviewer(project, "bob2")
    held, go_on = threading.Event(), threading.Event()

    def alice_holds():
        with transaction.atomic():  # her transaction (and its row lock) stays open while bob asks
            item = handout.next_item(queue, owner)
            held.set()
            go_on.wait(10)
            return item.pk

    first = start_thread(alice_holds)
    assert held.wait(10)
    try:
        theirs = handout.next_item(queue, bob)
    finally:
        go_on.set()
        first.join(10)
    assert theirs is not None and theirs.pk != first.result
    connection.close()


@pytest.mark.django_db(transaction=True)
def test_every_item_is_labelled_once_per_overlap_slot_when_reviewers_race(project, owner):
    queue, _ = sample_queue(project, owner, 12, overlap=2)
    people = [owner, reviewer(project, "r1"), reviewer(project, "r2")]

    def work(person):
        done = 0
        # None means nothing is free for this person *now*: an item someone else holds may still need their label
        # once it is released, so ask again until none is left that they have not labelled.
        left = Item.objects.filter(queue=queue, done=False).exclude(labels__reviewer=person)
        while left.exists():
            if (item := handout.next_item(queue, person)) is None:
                time.sleep(0.01)
                continue
            handout.submit(queue, item, person, answer())
            done += 1
        return done

    threads = [start_thread(work, person) for person in people]
    for thread in threads:
        thread.join(60)
    labels = list(Label.objects.filter(item__queue=queue).values_list("item_id", "reviewer_id"))
    assert len(labels) == 24 and len(set(labels)) == 24  # two per item, never the same person twice
    assert sum(t.result for t in threads) == 24 and all(t.result > 0 for t in threads)
    assert not Item.objects.filter(queue=queue, done=False).exists()
    connection.close()


def test_a_label_past_the_overlap_is_refused_as_taken_and_one_within_it_is_kept(project, owner):
    queue, _ = sample_queue(project, owner, 1)
    rita = reviewer(project, "rita")
    item = handout.next_item(queue, owner)
    Item.objects.filter(pk=item.pk).update(held_until=timezone.now() - timedelta(seconds=1))  # alice's hold ran out
    assert handout.next_item(queue, rita).pk == item.pk
    handout.submit(queue, item, rita, answer(helpful=2))
    with pytest.raises(Taken):
        handout.submit(queue, item, owner, answer(helpful=5))
    assert list(Label.objects.filter(item=item).values_list("values__helpful", flat=True)) == [2]
    queues.update_queue(queue, owner, {"overlap": 2})
    handout.submit(queue, item, owner, answer(helpful=5))  # now there is room for her label
    assert Label.objects.filter(item=item).count() == 2 and Item.objects.get(pk=item.pk).done


def test_a_skipped_item_goes_to_the_others_and_a_rubric_change_keeps_old_labels_version(api, project, owner):
    queue, _ = sample_queue(project, owner, 2)
    rita = reviewer(project, "rita")
    first = handout.next_item(queue, owner)
    handout.skip(queue, first, owner)
    assert handout.next_item(queue, rita).pk == first.pk and handout.next_item(queue, owner).pk != first.pk
    handout.submit(queue, first, rita, answer())
    changed = api.patch(f"/api/v1/review-queues/{queue.pk}", {"scores": [*RUBRIC, {"name": "length", "kind": "numeric", "min": 0, "max": 10}]}, format="json")
    assert changed.status_code == 200 and changed.json()["rubric"]["version"] == 2
    assert Label.objects.get(item=first, reviewer=rita).rubric.number == 1
    labels = api.get(f"/api/v1/review-queues/{queue.pk}/labels").json()
    assert labels["items"][0]["labels"][0]["rubric_version"] == 1


# -- bad input, roles ---------------------------------------------------------------------------------------------


def test_bad_rubrics_and_labels_answer_400_naming_the_field(api, project, owner):
    many = api.post("/api/v1/review-queues", {"name": "q", "scores": [{"name": f"s{i}", "kind": "boolean"} for i in range(1000)]}, format="json")
    assert many.status_code == 400 and many.json()["field"] == "scores"
    huge = api.post("/api/v1/review-queues", {"name": "q", "scores": RUBRIC, "instructions": "x" * 1_000_000}, format="json")
    assert huge.status_code == 400 and "instructions" in huge.json()
    inverted = api.post("/api/v1/review-queues", {"name": "q", "scores": [{"name": "n", "kind": "numeric", "min": 5, "max": 1}]}, format="json")
    assert inverted.status_code == 400 and inverted.json()["field"] == "scores[0].max"
    queue, _ = sample_queue(project, owner, 1)
    item = api.post(f"/api/v1/review-queues/{queue.pk}/next").json()["item"]
    for values, field in (
        (answer(helpful=6), "values.helpful"),
        (answer(tone="cheerful"), "values.tone"),
        ({**answer(), "extra": 1}, "values.extra"),
        ({"helpful": 3, "tone": "warm"}, "values.safe"),
    ):
        refused = api.post(f"/api/v1/review-queues/{queue.pk}/label", {"item": item["id"], "values": values}, format="json")
        assert refused.status_code == 400 and refused.json()["field"] == field, values
    assert not Label.objects.exists()
    too_many = api.post(f"/api/v1/review-queues/{queue.pk}/items", {"kind": "sample", "ids": [99_999_999]}, format="json")
    assert too_many.status_code == 404 and too_many.json()["field"] == "ids"


def test_reviewers_label_and_change_nothing_else_and_outsiders_see_nothing(api, outsider_api, project, owner):
    queue, samples = sample_queue(project, owner, 2)
    rita = reviewer(project, "rita")
    from rest_framework.test import APIClient

    rita_api = APIClient()
    rita_api.credentials(HTTP_AUTHORIZATION=f"Bearer {ApiKey.issue(project=project, user=rita, name='r')[1]}")
    item = rita_api.post(f"/api/v1/review-queues/{queue.pk}/next").json()["item"]
    assert item["judge_value"] is None
    assert rita_api.post(f"/api/v1/review-queues/{queue.pk}/label", {"item": item["id"], "values": answer()}, format="json").status_code == 201
    refused = rita_api.post("/api/v1/review-queues", {"name": "mine", "scores": RUBRIC}, format="json")
    assert refused.status_code == 403 and "reviewer" in refused.json()["detail"]
    assert rita_api.post("/api/v1/deployments", {"name": "x", "base_url": "http://127.0.0.2/v1", "model": "m"}, format="json").status_code == 403
    assert rita_api.get(f"/api/v1/evals/{samples[0].eval_id}").status_code == 200  # reads everything
    page = logged_in(rita, project)
    assert page.post("/evals/deployments/", {"name": "x"}).status_code == 403
    assert page.post("/review/", {"new_queue": "1", "name": "x", "overlap": 1, "scores": "[]"}).status_code == 403
    assert page.get(f"/review/{queue.pk}/label/").status_code == 200
    assert outsider_api.get(f"/api/v1/review-queues/{queue.pk}").status_code == 404
    assert outsider_api.post(f"/api/v1/review-queues/{queue.pk}/next").status_code == 404
    # The owner makes rita a member: she may now make queues.
    membership = Membership.objects.get(project=project, user=rita)
    assert api.patch(f"/api/v1/members/{membership.pk}", {"role": "member"}, format="json").status_code == 200
    assert rita_api.post("/api/v1/review-queues", {"name": "mine", "scores": RUBRIC}, format="json").status_code == 201


# -- judges -------------------------------------------------------------------------------------------------------


def judged_eval(project, grades: list[float], repeats: dict[int, float] | None = None) -> Eval:
    """An MT-Bench eval graded by a judge: one sample per grade (turn 1), some asked twice (`repeats`)."""
    deployment = Deployment.objects.create(project=project, name=f"m{len(grades)}", base_url="http://127.0.0.2:9/v1", model="m")
    judge = Deployment.objects.create(project=project, name=f"j{len(grades)}", base_url="http://127.0.0.2:9/v1", model="j")
    ev = Eval.objects.create(project=project, deployment=deployment, judge=judge, benchmark="mt_bench", seed=1, status="succeeded")
    Sample.objects.bulk_create(
        [
            Sample(
                eval=ev,
                row_index=i,
                input=f"q{i}",
                output=f"the answer to {i}",
                scores={"turns": [{"rating": g}], **({"repeat": [repeats[i]]} if i in (repeats or {}) else {})},
            )
            for i, g in enumerate(grades)
        ]
    )
    return ev


def test_a_judges_card_moves_as_queue_labels_arrive_weighted_by_stratum(api, project, owner):
    grades = [9.0] * 40 + [5.0] * 10
    ev = judged_eval(project, grades, repeats={0: 3.0})  # asked twice, it changed its mind on row 0: a close call
    key = judge_key_of(ev)
    made = api.post("/api/v1/review-queues", {"name": "cal", "judge": key, "target_width": 0.3}, format="json")
    assert made.status_code == 201, made.json()
    queue = Queue.objects.get(pk=made.json()["id"])
    assert queue.judge_score == "grade" and queue.rubric.scores[0]["max"] == 10
    strata = dict(Item.objects.filter(queue=queue).values_list("object_id", "stratum"))
    rows = dict(Sample.objects.filter(eval=ev).values_list("pk", "row_index"))
    assert {rows[pk] for pk, h in strata.items() if h == active.CLOSE} == {0, *range(40, 50)}
    assert card(project, key)["n"] == 0
    people = {}
    for _ in range(30):
        item = handout.next_item(queue, owner)
        grade = 8.0 if item.judge_value == 9.0 else 2.0  # people agree with the sure 9s, not with the 5s
        handout.submit(queue, item, owner, {"grade": grade})
        people[item.pk] = (item.judge_value, grade, item.stratum)
    shown = card(project, key)
    assert shown["n"] == 30 and shown["calibrated"] and shown["confusion"]["grades"] == [2.0, 5.0, 8.0, 9.0]
    labelled = list(people.values())
    sizes = {h: list(strata.values()).count(h) for h in set(strata.values())}
    weights = active.label_weights([s for _, _, s in labelled], sizes)
    assert shown["kappa"] == pytest.approx(cohen_kappa([j for j, _, _ in labelled], [h for _, h, _ in labelled], "quadratic", weights))
    # Close calls were asked about more often than their share of the items: the allocation leaned on them.
    close = sum(1 for _, _, s in labelled if s == active.CLOSE)
    assert close / 30 > 11 / 50
    agreed = api.get(f"/api/v1/review-queues/{queue.pk}/agreement").json()["judge"]
    assert agreed["n"] == 30 and agreed["kappa"] == pytest.approx(shown["kappa"]) and agreed["width"] > 0


def test_a_calibrating_queue_stops_once_kappa_is_known_to_the_width_asked(project, owner):
    rng = np.random.default_rng(5)
    grades = [float(g) for g in rng.integers(0, 2, 300)]
    ev = Eval.objects.create(
        project=project,
        deployment=Deployment.objects.create(project=project, name="m", base_url="http://127.0.0.2:9/v1", model="m"),
        judge=Deployment.objects.create(project=project, name="j", base_url="http://127.0.0.2:9/v1", model="j"),
        benchmark="mt_bench",
        seed=1,
        status="succeeded",
    )
    Sample.objects.bulk_create(
        [Sample(eval=ev, row_index=i, input="q", output="a", scores={"turns": [{"rating": 9.0 if g else 2.0}]}) for i, g in enumerate(grades)]
    )
    queue = queues.calibrate(project, owner, judge_key_of(ev), target_width=0.6)
    count = 0
    while (item := handout.next_item(queue, owner)) is not None:
        flip = rng.random() < 0.1
        handout.submit(queue, item, owner, {"grade": (2.0 if item.judge_value == 9.0 else 9.0) if flip else item.judge_value})
        count += 1
        assert count < 300
    queue.refresh_from_db()
    assert queue.stopped_at is not None and active.MIN_LABELS <= count < 300 and "after" in queue.stop_reason
    # The interval it stopped on is the one the queue reports, and narrower than asked.
    found = judged.estimate(queue)
    assert found["enough"] and found["width"] <= 0.6 and found["n"] == count


def test_active_calibration_reaches_the_width_with_fewer_labels_than_random_and_the_interval_still_holds_kappa():
    found = simulation.compare(8, target_width=0.25)
    assert found["active"]["median_labels"] < found["random"]["median_labels"]
    # Each run's interval held the true κ in most runs under both (sequential stopping costs some coverage).
    assert found["active"]["coverage"] >= 0.6 and found["random"]["coverage"] >= 0.6
    unequal = kappa_interval([1, 0, 1, 1, 0, 0], [1, 0, 0, 1, 0, 1], strata=[0, 0, 0, 1, 1, 1])
    assert unequal.low < unequal.high


# -- data and pages -----------------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_labels_become_a_dataset_version_and_the_page_and_cli_show_progress(api, owner_client, project, owner, bv):
    queue, samples = sample_queue(project, owner, 3, overlap=2)
    rita = reviewer(project, "rita", role=Membership.Role.MEMBER)
    for person, helpful in ((owner, 4), (rita, 2)):
        item = handout.next_item(queue, person)
        handout.submit(queue, item, person, answer(helpful=helpful, tone="flat"))
    made = api.post(f"/api/v1/review-queues/{queue.pk}/dataset").json()
    queue.refresh_from_db()
    rows = list(rows_at(queue.dataset))
    assert made["version"] == 1 and len(rows) == 1 and rows[0].input == "q0"
    assert '"helpful": 3.0' in rows[0].expected and '"tone": "flat"' in rows[0].expected and len(rows[0].metadata["labels"]) == 2
    item = handout.next_item(queue, owner)
    handout.submit(queue, item, owner, answer())
    assert api.post(f"/api/v1/review-queues/{queue.pk}/dataset").json()["version"] == 2
    page = owner_client.get(f"/review/{queue.pk}/").content.decode()
    assert "2 of 3 items" not in page and "3 of 6 labels" in page and "rita" in page
    shown = bv("review", "show", str(queue.pk))
    assert shown.exit_code == 0 and "alice" in shown.output and "rita" in shown.output
    exported = bv("review", "export", "q")
    assert exported.exit_code == 0 and len(exported.output.strip().splitlines()) == 2


def test_the_review_page_is_blind_until_you_label_and_takes_the_form(owner_client, project, owner):
    grades = [9.0, 5.0]
    ev = judged_eval(project, grades)
    queue = queues.calibrate(project, owner, judge_key_of(ev), target_width=None)
    page = owner_client.get(f"/review/{queue.pk}/label/").content.decode()
    item = Item.objects.get(queue=queue, held_by=owner)
    row = Sample.objects.get(pk=item.object_id).row_index
    assert "blind-note" in page and "judge-verdict" not in page and f"the answer to {row}" in page  # the sample's answer, as its page shows it
    posted = owner_client.post(f"/review/{queue.pk}/label/", {"item": item.pk, "score-grade": "11", "started": "1"})
    assert posted.status_code == 400 and "from 1 to 10" in posted.content.decode()
    assert owner_client.post(f"/review/{queue.pk}/label/", {"item": item.pk, "score-grade": "7", "started": "1"}).status_code == 302
    again = owner_client.get(f"/review/{queue.pk}/label/?item={item.pk}").content.decode()
    assert "judge-verdict" in again and "Change my label" in again


def test_sessions_steps_and_trials_are_reviewed_as_their_own_pages_show_them(api, owner_client, project, owner):
    post(
        api,
        [exchange("support-1", "Where is my order?", "It ships on Tuesday.", 1_765_000_000), exchange("support-1", "Thanks", "You're welcome.", 1_765_000_005)],
    )
    version = import_task_set(project, owner, "tasks", {p.relative_to(HELLO).as_posix(): p.read_bytes() for p in HELLO.rglob("*") if p.is_file()})[0]
    trial = create_job(project, owner, version=version, agents=["nop"], budget_cents=100).trials.get()
    Trial.objects.filter(pk=trial.pk).update(agent_output="the agent printed this", verifier_output="the verifier printed that")
    queue = queues.create_queue(project, owner, {"name": "mixed", "scores": [{"name": "ok", "kind": "boolean"}]})
    for body in ({"kind": "session", "ids": ["support-1"]}, {"kind": "step", "ids": ["support-1"], "step": 2}, {"kind": "trial", "ids": [trial.pk]}):
        assert api.post(f"/api/v1/review-queues/{queue.pk}/items", body, format="json").json()["added"] == 1
    refused = api.post(f"/api/v1/review-queues/{queue.pk}/items", {"kind": "session", "ids": ["nobody's"]}, format="json")
    assert refused.status_code == 404 and refused.json()["field"] == "ids"
    seen = []
    for _ in range(3):
        page = owner_client.get(f"/review/{queue.pk}/label/").content.decode()
        seen.append(page)
        item = Item.objects.get(queue=queue, held_by=owner, done=False)
        handout.submit(queue, item, owner, {"ok": True})
    session, step, trial_page = seen
    assert "Where is my order?" in session and "You&#x27;re welcome." in session
    assert "Step 2 of session support-1" in step and "You&#x27;re welcome." in step and "It ships on Tuesday." not in step
    assert "the agent printed this" in trial_page and "the verifier printed that" in trial_page


def test_what_a_blind_reviewer_and_a_rubric_change_cannot_do(api, project, owner):
    queue, samples = sample_queue(project, owner, 2, overlap=2)
    rita = reviewer(project, "rita")
    from rest_framework.test import APIClient

    rita_api = APIClient()
    rita_api.credentials(HTTP_AUTHORIZATION=f"Bearer {ApiKey.issue(project=project, user=rita, name='r')[1]}")
    first = handout.next_item(queue, owner)
    handout.submit(queue, first, owner, answer(helpful=5))
    # Rita skips the item alice labelled: a skip does not unblind it (the labels, nor which items people disagree on).
    handout.skip(queue, first, rita)
    assert rita_api.get(f"/api/v1/review-queues/{queue.pk}/labels").json()["items"] == []
    assert "disagreements" not in rita_api.get(f"/api/v1/review-queues/{queue.pk}/agreement").json()
    handout.submit(queue, first, rita, answer(helpful=1))
    assert [e["item"] for e in rita_api.get(f"/api/v1/review-queues/{queue.pk}/labels").json()["items"]] == [first.pk]
    # Adjudication: the owner opens an item she did not label, unblinded; a reviewer cannot open one she did not.
    second = Item.objects.filter(queue=queue).exclude(pk=first.pk).get()
    assert "judge-verdict" not in shown(logged_in(owner, project).get(f"/review/{queue.pk}/label/?item={second.pk}"))
    assert logged_in(rita, project).get(f"/review/{queue.pk}/label/?item={second.pk}").status_code == 404
    # A categorical score that becomes a number: labels of the old version are left out, not read as numbers.
    changed = [{**score, "kind": "numeric", "min": 0, "max": 2} if score["name"] == "tone" else score for score in RUBRIC]
    changed = [{k: v for k, v in score.items() if k != "labels"} for score in changed]
    assert api.patch(f"/api/v1/review-queues/{queue.pk}", {"scores": changed}, format="json").status_code == 200
    assert agreement.report(queue)["scores"] and api.get(f"/api/v1/review-queues/{queue.pk}/labels").json()["items"][0]["consensus"]["helpful"] == 3.0
    # With room for two labels, a label from someone whose hold ran out is kept while another holds the item.
    handout.next_item(queue, owner)  # alice holds the second item
    Item.objects.filter(pk=second.pk).update(held_by=rita, held_until=timezone.now() + timedelta(minutes=5))
    handout.submit(queue, second, owner, {"helpful": 3, "safe": True, "tone": 1})
    assert Item.objects.get(pk=second.pk).labels_done == 1 and Item.objects.get(pk=second.pk).held_by == rita


def test_a_calibrating_queue_keeps_its_judges_scale_defaults_its_width_and_resumes_only_narrower(api, owner_client, project, owner):
    ev = judged_eval(project, [9.0] * 30 + [5.0] * 10)
    made = api.post("/api/v1/review-queues", {"name": "cal", "judge": judge_key_of(ev)}, format="json").json()
    queue = Queue.objects.get(pk=made["id"])
    assert made["target_width"] == queues.DEFAULT_WIDTH
    refused = api.patch(f"/api/v1/review-queues/{queue.pk}", {"scores": [{"name": "grade", "kind": "numeric", "min": 0, "max": 100}]}, format="json")
    assert refused.status_code == 400 and refused.json()["field"] == "scores"
    for _ in range(40):
        if (item := handout.next_item(queue, owner)) is None:
            break
        handout.submit(queue, item, owner, {"grade": item.judge_value})
    assert calibration_status(ev)["labels"] == Label.objects.filter(item__queue=queue).count() >= active.MIN_LABELS
    queue.refresh_from_db()
    found = judged.estimate(queue)
    # People always agree: it stops early. Resuming at the width it has is refused; a narrower one hands items out again.
    assert queue.stopped_at is not None and found["width"] <= queues.DEFAULT_WIDTH
    again = owner_client.post(f"/review/{queue.pk}/resume/", {"target_width": f"{found['width'] + 0.01:.2f}"})
    assert again.status_code == 400 and "already known" in again.content.decode()
    assert owner_client.post(f"/review/{queue.pk}/resume/", {"target_width": "0.02"}).status_code == 302
    queue.refresh_from_db()
    assert queue.stopped_at is None and queue.target_width == 0.02 and handout.next_item(queue, owner) is not None


def test_a_filter_takes_whole_days_samples_at_random_and_refuses_a_day_that_does_not_exist(api, project, owner):
    queue, samples = sample_queue(project, owner, 1)
    deployment = Deployment.objects.get(project=project)
    ev = Eval.objects.create(project=project, deployment=deployment, benchmark="mmlu", seed=1, status="succeeded")
    Sample.objects.bulk_create([Sample(eval=ev, row_index=i, input=f"m{i}") for i in range(400)])
    today = timezone.now().date().isoformat()
    refused = api.post(f"/api/v1/review-queues/{queue.pk}/items", {"kind": "sample", "filters": {"since": "2026-02-30"}}, format="json")
    assert refused.status_code == 400 and refused.json()["field"] == "filters.since"
    negative = api.post(f"/api/v1/review-queues/{queue.pk}/items", {"kind": "sample", "filters": {"eval": -5}}, format="json")
    assert negative.status_code == 400 and negative.json()["field"] == "filters.eval"
    added = api.post(
        f"/api/v1/review-queues/{queue.pk}/items", {"kind": "sample", "filters": {"benchmark": "mmlu", "until": today, "sample_rate": 0.25}}, format="json"
    ).json()["added"]
    assert 60 <= added <= 140  # a quarter of 400, drawn at random (binomial: 100 ± 5 sd), and today's samples are in


@pytest.mark.django_db(transaction=True)
def test_a_human_graded_eval_compares_paired_with_the_eval_it_labels(api, owner_client, project, owner, bv):
    queue, samples = sample_queue(project, owner, 6, overlap=2)
    rita = reviewer(project, "rita")
    source = samples[0].eval
    Sample.objects.filter(eval=source, row_index__in=[0, 1, 2]).update(score=1.0)
    Sample.objects.filter(eval=source, row_index__in=[3, 4, 5]).update(score=0.0)
    people_say = {0: (True, True), 1: (False, False), 2: (True, False), 3: (True, True)}  # rows 4 and 5 stay unlabelled
    for item in Item.objects.filter(queue=queue).order_by("pk"):
        row = Sample.objects.get(pk=item.object_id).row_index
        if row in people_say:
            for person, safe in zip((owner, rita), people_say[row], strict=True):
                handout.submit(queue, item, person, answer(safe=safe))
    refused = api.post(f"/api/v1/review-queues/{queue.pk}/eval", {"score": "tone"}, format="json")
    assert refused.status_code == 400 and refused.json()["field"] == "score"
    made = api.post(f"/api/v1/review-queues/{queue.pk}/eval", {"score": "safe"}, format="json")
    assert made.status_code == 201 and made.json()["rows"] == 4
    human = Eval.objects.get(pk=made.json()["eval"])
    # Consensus (the commonest answer, the first given on a tie): rows 0, 2, 3 yes, row 1 no.
    assert dict(human.samples.values_list("row_index", "score")) == {0: 1.0, 1: 0.0, 2: 1.0, 3: 1.0}
    assert human.score == pytest.approx(0.75) and human.score_low < 0.75 < human.score_high and human.status == "succeeded"
    compared = api.get(f"/api/v1/evals/{source.pk}/compare/{human.pk}").json()
    assert compared["n"] == 4 and compared["unpaired"] == 2
    assert {(f["row_index"], f["direction"]) for f in compared["flipped"]} == {(1, "right_to_wrong"), (3, "wrong_to_right")}
    assert human.cost in (None, 0)  # no deployment was asked
    assert owner_client.post(f"/review/{queue.pk}/eval/", {"score": "helpful"}).status_code == 302
    assert json.loads(bv("review", "eval", str(queue.pk), "--score", "safe", "--json").stdout)["rows"] == 4
    assert "Graded by people" in shown(owner_client.get(f"/evals/{human.pk}/")) and api.get(f"/api/v1/evals/{human.pk}").json()["score"] == 0.75


def test_the_queue_list_costs_the_same_queries_for_one_queue_or_five(api, owner_client, project, owner):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def cost(path: str) -> int:
        (api if path.startswith("/api/") else owner_client).get(path)  # once before: a key's first use of the minute is stamped
        with CaptureQueriesContext(connection) as queries:
            assert api.get(path).status_code == 200 if path.startswith("/api/") else owner_client.get(path).status_code == 200
        return len(queries)

    sample_queue(project, owner, 3)
    one = cost("/api/v1/review-queues"), cost("/review/")
    for n in range(4):
        queues.create_queue(project, owner, {"name": f"more {n}", "scores": RUBRIC})
    assert (cost("/api/v1/review-queues"), cost("/review/")) == one
    listed = api.get("/api/v1/review-queues").json()["results"]
    assert sorted(q["progress"]["items"] for q in listed) == [0, 0, 0, 0, 3] and {q["rubric"]["version"] for q in listed} == {1}
