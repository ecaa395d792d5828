"""A task set's audit (agent_tasks/audits.py) without sandboxes: what it runs, the verdicts it reads from its trials, and
its pages, API and export. The red team's attacks against real verifiers are tests/test_agent_trials.py's part, and a
whole audit in real sandboxes through `bv tasks audit` is tests/test_audit_run.py's."""

import json

import pytest
from django.utils import timezone

from agent_tasks import audits, jobs
from agent_tasks.agents import ATTACKS
from agent_tasks.models import Job, Trial

from .test_agent_job_rules import PRICE, fund, new_job, task_set, unzip

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def priced(settings):
    settings.TRIAL_PRICE_CENTS = PRICE


def end(audit: Job, task: str, rewards: dict[str, float | None]):
    """The audit's trials of `task` ended with these rewards, by agent (None: errored); the others stay as they are."""
    for agent, reward in rewards.items():
        fields = {"status": "succeeded", "reward": reward} if reward is not None else {"status": "errored", "error": "The platform failed; retry this trial"}
        Trial.objects.filter(job=audit, task__name=task, agent=agent).update(finished_at=timezone.now(), **fields)


SOUND = {"oracle": 1.0, "nop": 0.0, **{f"red-team:{a}": 0.0 for a in ATTACKS}}


def test_an_audit_runs_the_oracle_nop_and_every_attack_on_each_task_with_a_solution(project, owner):
    fund(project, 10_000)
    files = task_set(project, owner, ["a", "b"])
    unsolved = task_set(project, owner, ["c"], name="other", solution=False)
    audit = audits.start(project, owner, files)
    assert (audit.purpose, audit.attempts, sorted(audit.agents)) == ("audit", 1, sorted(["oracle", "nop", *(f"red-team:{a}" for a in ATTACKS)]))
    assert audit.trials.count() == 2 * (2 + len(ATTACKS)) and audit.budget_cents == audit.trials.count() * PRICE
    with pytest.raises(audits.AuditRefused, match="has solution/solve.sh"):
        audits.start(project, owner, unsolved)


def test_the_verdicts_name_what_each_task_is_open_to(project, owner):
    version = task_set(project, owner, ["broken", "empty", "errored", "hackable", "pending", "sound"])
    audit = audits.start(project, owner, version)
    end(audit, "sound", SOUND)
    end(audit, "hackable", {**SOUND, "red-team:planted-tools": 1.0, "red-team:test-inputs": 1.0})
    end(audit, "broken", {**SOUND, "oracle": 0.5})
    end(audit, "empty", {**SOUND, "nop": 1.0})
    end(audit, "errored", {**SOUND, "red-team:shell-hooks": None})
    end(audit, "pending", {"oracle": 1.0})
    found = {v.task: v for v in audits.verdicts(audit)}
    assert {name: v.status for name, v in found.items()} == {
        "broken": "broken",
        "empty": "broken",
        "errored": "errored",
        "hackable": "hackable",
        "pending": "pending",
        "sound": "sound",
    }
    assert found["hackable"].hacks == ["planted-tools", "test-inputs"] and "planted-tools scored 1 without solving it" in found["hackable"].reasons[0]
    assert "scores 0.5, not 1" in found["broken"].reasons[0] and "Doing nothing scores 1" in found["empty"].reasons[0]
    assert found["errored"].reasons == ["red-team:shell-hooks: The platform failed; retry this trial"]
    summary = audits.summary(version)
    assert summary["counts"] == {"sound": 1, "hackable": 1, "broken": 2, "errored": 1, "pending": 1, "not audited": 0}
    assert audits.warnings(version) == ["broken is broken", "empty is broken", "hackable is hackable (planted-tools, test-inputs)"]


def test_a_retried_trial_replaces_its_errored_one_in_the_verdict(project, owner):
    fund(project, 10_000)
    version = task_set(project, owner, ["a"])
    audit = audits.start(project, owner, version)
    end(audit, "a", {**SOUND, "nop": None})
    assert audits.verdicts(audit)[0].status == "errored"
    Job.objects.filter(pk=audit.pk).update(status="finished")
    assert jobs.retry_errors(audit) == 1
    assert audits.verdicts(audit)[0].status == "pending"
    Trial.objects.filter(job=audit, status="queued").update(status="succeeded", reward=0.0)
    assert audits.verdicts(audit)[0].status == "sound"


def test_the_api_starts_an_audit_and_reads_its_verdicts(project, owner, api, outsider_api):
    fund(project, 10_000)
    version = task_set(project, owner, ["a"])
    set_id = version.task_set.pk
    assert api.get(f"/api/v1/task-sets/{set_id}/audit").status_code == 404
    started = api.post(f"/api/v1/task-sets/{set_id}/audit", {"version": version.number}, format="json")
    assert started.status_code == 201, started.content
    body = started.json()
    assert (body["version"], body["job"]["purpose"], body["counts"]["pending"]) == (version.number, "audit", 1)
    end(Job.objects.get(pk=body["job"]["id"]), "a", {**SOUND, "red-team:printed-reward": 1.0})
    shown = api.get(f"/api/v1/task-sets/{set_id}/audit", {"version": version.number}).json()
    assert [(t["task"], t["status"], t["hacks"]) for t in shown["tasks"]] == [("a", "hackable", ["printed-reward"])]
    for bad in ("x", "²", "-1", "99999999999"):
        assert api.get(f"/api/v1/task-sets/{set_id}/audit", {"version": bad}).status_code == 400, bad
    assert api.post(f"/api/v1/task-sets/{set_id}/audit", {"version": 9}, format="json").status_code == 400
    assert outsider_api.get(f"/api/v1/task-sets/{set_id}/audit").status_code == 404
    assert outsider_api.post(f"/api/v1/task-sets/{set_id}/audit", {}, format="json").status_code == 404


def test_the_pages_show_the_verdicts_and_a_job_on_an_audited_version_says_what_it_found(project, owner, owner_client, api):
    fund(project, 10_000)
    version = task_set(project, owner, ["a", "b"])
    page = owner_client.get(version.task_set.get_absolute_url()).content.decode()
    assert "Not audited" in page and f"Audit version {version.number}" in page
    answer = owner_client.post(f"/tasks/{version.task_set.pk}/versions/{version.number}/audit/")
    audit = Job.objects.get(purpose="audit")
    assert answer.status_code == 302 and answer["Location"] == audit.get_absolute_url()
    end(audit, "a", SOUND)
    end(audit, "b", {**SOUND, "red-team:verifier-links": 1.0})
    page = owner_client.get(version.task_set.get_absolute_url()).content.decode()
    assert '<span class="status hackable"' in page and "<code>verifier-links</code>" in page and '<span class="status sound"' in page
    job = new_job(project, owner, version)
    shown = owner_client.get(job.get_absolute_url()).content.decode()
    assert 'id="audit-warnings"' in shown and "b is hackable (verifier-links)" in shown
    assert 'id="audit"' in owner_client.get(audit.get_absolute_url()).content.decode()
    exported = json.loads(unzip(api.get(f"/api/v1/jobs/{job.pk}/export").content)[f"job-{job.pk}/result.json"])
    assert {t["task"]: t["status"] for t in exported["belvedir_audit"]["tasks"]} == {"a": "sound", "b": "hackable"}
    assert owner_client.post(f"/tasks/{version.task_set.pk}/versions/99/audit/").status_code == 404
