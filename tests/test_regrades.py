"""Regrades without sandboxes (agent_tasks/regrades.py, versions.py): what a new version says changed, which trials a
regrade grades or skips and why, its comparison, its pages and API. Grading kept outputs in real sandboxes, through
`bv jobs regrade`, is tests/test_audit_and_regrade.py's part."""

import pytest
from django.utils import timezone

from agent_tasks import jobs, regrades, trials
from agent_tasks.actions import import_task_set
from agent_tasks.models import Grade, Regrade
from agent_tasks.outputs import Outputs

from .test_agent_job_rules import PRICE, fund, new_job

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def priced(settings):
    settings.TRIAL_PRICE_CENTS = settings.GRADE_PRICE_CENTS = PRICE


def files(tests: dict[str, str], *, instruction: str = "Write /app/answer.", metadata: str = "easy", outputs: bool = True) -> dict[str, bytes]:
    """A set of tasks named by `tests` (name: test.sh); one setting or file at a time changes between versions."""
    found = {}
    for name, test in tests.items():
        verifier = '[verifier]\noutputs = ["/app/answer"]\n' if outputs else ""
        found.update(
            {
                f"{name}/task.toml": f'version = "1.0"\n[metadata]\ndifficulty = "{metadata}"\n{verifier}'.encode(),
                f"{name}/instruction.md": f"{instruction} ({name})\n".encode(),
                f"{name}/environment/Dockerfile": b"FROM belvedir-sandbox:bookworm\nWORKDIR /app\n",
                f"{name}/tests/test.sh": test.encode(),
                f"{name}/solution/solve.sh": b"echo 42 > /app/answer\n",
            }
        )
    return found


TESTS = {"a": "grep -q 42 /app/answer", "b": "test -e /app/answer", "c": "true"}


def ran(job, rewards: dict[str, float | None], kept: bool = True):
    """The job's trials ended with these rewards by task (None: errored), each keeping its outputs when `kept`."""
    for trial in job.trials.select_related("task"):
        reward = rewards[trial.task.name]
        result = trials.TrialResult(reward=reward, error="" if reward is not None else "The sandbox stopped")
        if kept and reward is not None:
            result.outputs = Outputs(entries={"/app/answer": ("file", 0o644, b"42\n")})
        trials.finish(jobs.claim(trial.pk), result)


def test_a_new_version_says_per_task_what_changed_and_what_it_means(project, owner):
    import_task_set(project, owner, "s", files(TESTS))
    v2 = import_task_set(
        project, owner, "s", files({**TESTS, "a": "grep -q 43 /app/answer", "d": "true"}, metadata="hard") | files({"c": "true"}, instruction="Other.")
    )[0]
    tasks = v2.changes["tasks"]
    assert v2.changes["previous"] == 1
    assert {name: tasks[name]["change"] for name in tasks} == {"a": "regrade", "b": "stand", "c": "rerun", "d": "added"}
    assert tasks["a"]["parts"] == ["tests", "metadata"] and tasks["b"]["parts"] == ["metadata"] and "instruction" in tasks["c"]["parts"]
    v3 = import_task_set(project, owner, "s", files({"a": "grep -q 43 /app/answer"}, metadata="hard"))[0]
    assert {name: found["change"] for name, found in v3.changes["tasks"].items()} == {"a": "unchanged", "b": "removed", "c": "removed", "d": "removed"}


def test_a_regrade_grades_what_it_can_and_says_why_it_skips_the_rest(project, owner):
    fund(project, 10_000)
    v1 = import_task_set(project, owner, "s", files(TESTS))[0]
    job = new_job(project, owner, v1, agents=["nop"])
    ran(job, {"a": 1.0, "b": 1.0, "c": None})
    v2 = import_task_set(project, owner, "s", files({"a": "grep -q 43 /app/answer", "b": "test -e /app/answer"}) | files({"c": "true"}, instruction="Other."))[
        0
    ]
    regrade = regrades.start(job, v2, owner)
    by_task = {g.trial.task.name: g for g in regrade.grades.select_related("trial__task")}
    assert (by_task["a"].status, by_task["b"].status, by_task["c"].status) == ("queued", "queued", "skipped")
    assert by_task["c"].error == "It errored: there is no reward to compare."
    assert by_task["a"].task.version == v2


def test_trials_that_kept_no_outputs_or_whose_task_became_another_are_skipped_and_nothing_gradable_is_refused(project, owner):
    fund(project, 10_000)
    v1 = import_task_set(project, owner, "s", files({"a": TESTS["a"]}, outputs=False))[0]
    job = new_job(project, owner, v1, agents=["nop"])
    ran(job, {"a": 1.0}, kept=False)
    with pytest.raises(regrades.RegradeRefused, match=r"its task declares none \(\[verifier\] outputs\)"):
        regrades.start(job, v1, owner)
    v2 = import_task_set(project, owner, "s", files({"a": TESTS["a"]}, instruction="Another ask.", outputs=False))[0]
    with pytest.raises(regrades.RegradeRefused, match="instruction changed: its agents must run it again"):
        regrades.start(job, v2, owner)
    other = import_task_set(project, owner, "other", files(TESTS))[0]
    with pytest.raises(regrades.RegradeRefused, match="another task set"):
        regrades.start(job, other, owner)
    assert not Regrade.objects.exists()


def test_the_comparison_pairs_old_and_new_rewards_and_lists_what_moved(project, owner):
    fund(project, 10_000)
    v1 = import_task_set(project, owner, "s", files({f"t{i}": "true" for i in range(8)}))[0]
    job = new_job(project, owner, v1, agents=["nop"])
    ran(job, {f"t{i}": 1.0 for i in range(8)})
    regrade = regrades.start(job, v1, owner)
    for grade in regrade.grades.select_related("trial__task"):
        reward = 0.0 if grade.trial.task.name in ("t0", "t1", "t2", "t3", "t4", "t5") else 1.0
        Grade.objects.filter(pk=grade.pk).update(status="succeeded", reward=reward, finished_at=timezone.now())
    found = regrades.comparison(regrade)
    assert (found["n"], found["delta"], found["verdict"], found["test"]) == (8, -0.75, "worse", "mcnemar")
    assert sorted(m["task"] for m in found["moved"]) == ["t0", "t1", "t2", "t3", "t4", "t5"] and found["moved"][0]["old"] == 1.0
    assert found["counts"]["succeeded"] == 8


def test_a_grade_is_charged_at_its_claim_skipped_when_the_balance_cannot_pay_and_a_cancel_refunds_any_waiting(project, owner, settings):
    fund(project, 3 * PRICE)
    v1 = import_task_set(project, owner, "s", files({"a": "true", "b": "true"}))[0]
    job = new_job(project, owner, v1, agents=["nop"])
    ran(job, {"a": 1.0, "b": 1.0})  # 2 × PRICE: one grade's worth left
    regrade = regrades.start(job, v1, owner)
    first, second = regrade.grades.order_by("pk")
    assert regrades.claim(first.pk).status == "running" and regrades.claim(first.pk) is None
    assert regrades.claim(second.pk) is None
    second.refresh_from_db()
    assert second.status == "skipped" and "Insufficient balance" in second.error
    regrade.refresh_from_db()
    assert regrade.charged_cents == PRICE


def test_the_api_and_pages_start_follow_and_cancel_a_regrade(project, owner, api, outsider_api, owner_client, held):
    fund(project, 10_000)
    v1 = import_task_set(project, owner, "s", files({"a": "true"}))[0]
    job = new_job(project, owner, v1, agents=["nop"])
    ran(job, {"a": 1.0})
    assert api.post(f"/api/v1/jobs/{job.pk}/regrade", {"version": "²"}, format="json").status_code == 400
    assert api.post(f"/api/v1/jobs/{job.pk}/regrade", {"version": 7}, format="json").status_code == 400
    made = api.post(f"/api/v1/jobs/{job.pk}/regrade", {"version": 1}, format="json")
    assert made.status_code == 201, made.content
    body = made.json()
    assert (body["job"], body["version"], body["status"], body["comparison"]["counts"]["queued"]) == (job.pk, 1, "running", 1)
    grades = api.get(f"/api/v1/regrades/{body['id']}/grades").json()
    assert [(g["task"], g["status"], g["old_reward"]) for g in grades["results"]] == [("a", "queued", 1.0)]
    page = owner_client.get(f"/regrades/{body['id']}/").content.decode()
    assert "graded again by" in page and 'id="regrade-grades"' in page
    assert 'id="regrades"' in owner_client.get(job.get_absolute_url()).content.decode()
    cancelled = api.post(f"/api/v1/regrades/{body['id']}/cancel").json()
    assert (cancelled["status"], cancelled["skipped"]) == ("cancelled", 1)
    for path in (f"/api/v1/regrades/{body['id']}", f"/api/v1/regrades/{body['id']}/grades"):
        assert outsider_api.get(path).status_code == 404
    assert outsider_api.post(f"/api/v1/jobs/{job.pk}/regrade", {"version": 1}, format="json").status_code == 404
    started = owner_client.post(f"/jobs/{job.pk}/regrade/", {"version": "1"})
    assert started.status_code == 302 and started["Location"] == Regrade.objects.latest("pk").get_absolute_url()


@pytest.fixture
def held(monkeypatch):
    sent = []
    monkeypatch.setattr(regrades, "async_task", lambda name, pk, **kw: sent.append(pk))
    return sent
