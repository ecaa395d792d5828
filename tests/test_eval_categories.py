"""Scores by category: an eval of a benchmark with categories, on its page, in the API, in `bv evals show`, and in the paired comparison."""

import json

import pytest
from click.testing import CliRunner

from belvedir_cli.main import cli
from evals import statistics
from evals.actions import create_eval
from evals.benchmarks import math500, mmlu
from evals.models import Deployment, Sample
from evals.tasks import run_eval

from .fakes.openai_server import FakeOpenAI

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("loopback_deployments")]
ROWS = {row.input: row for row in mmlu.BENCHMARK.rows()}


def stem_only(question: str) -> str:
    """Right on STEM questions, wrong (another letter) on the rest."""
    row = ROWS[question]
    wrong = "A" if row.reference != "A" else "B"
    return f"Thinking...\nAnswer: {row.reference if row.categories['group'] == 'STEM' else wrong}"


@pytest.fixture
def fake():
    with FakeOpenAI(answer=stem_only) as server:
        yield server


@pytest.fixture
def deployment(project, fake):
    return Deployment.objects.create(project=project, name="fake", base_url=fake.url, model="fake-model")


@pytest.fixture
def mmlu_eval(project, owner, deployment):
    ev = create_eval(project, owner, deployment=deployment, benchmark="mmlu", sample_limit=60, seed=3)
    run_eval(ev.pk)
    ev.refresh_from_db()
    return ev


def test_an_mmlu_eval_scores_each_subject_and_group_with_its_interval(api, mmlu_eval):
    body = api.get(f"/api/v1/evals/{mmlu_eval.pk}").json()
    assert body["status"] == "succeeded" and body["done_count"] == 60
    assert list(body["categories"]) == ["subject", "group"]
    groups = {g["name"]: g for g in body["categories"]["group"]}
    stored = Sample.objects.filter(eval=mmlu_eval)
    stem = sum(1 for s in stored if s.category["group"] == "STEM")
    assert 0 < stem < 60 and groups["STEM"]["n"] == stem
    assert groups["STEM"]["score"] == 1.0 and groups["STEM"]["score_ci"] == statistics.wilson(stem, stem).as_list()
    for name in set(groups) - {"STEM"}:
        assert groups[name]["score"] == 0.0 and groups[name]["score_ci"] == statistics.wilson(0, groups[name]["n"]).as_list()
    subjects = body["categories"]["subject"]
    assert sum(s["n"] for s in subjects) == 60
    assert all(s["score"] == (1.0 if mmlu.GROUP_OF[s["name"]] == "STEM" else 0.0) for s in subjects)
    # The list stays light: no per-category scores there.
    assert "categories" not in api.get("/api/v1/evals").json()["results"][0]


def test_the_eval_page_shows_a_table_and_a_chart_per_axis(owner_client, mmlu_eval):
    page = owner_client.get(mmlu_eval.get_absolute_url()).content.decode()
    assert 'id="by-subject"' in page and 'id="by-group"' in page
    assert "Score by group" in page and 'aria-label="score by group with 95% intervals"' in page
    low, high = statistics.wilson(0, Sample.objects.filter(eval=mmlu_eval, category__group="other").count()).as_list()
    assert "<td>other</td>" in page and f"{low:.3f}–{high:.3f}" in page


def test_bv_evals_show_prints_the_scores_by_category(live_server, api_key, mmlu_eval, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    env = {"BELVEDIR_API_KEY": api_key, "BELVEDIR_BASE_URL": live_server.url}
    shown = CliRunner().invoke(cli, ["evals", "show", str(mmlu_eval.pk)], env=env, obj={})
    assert shown.exit_code == 0, shown.output
    assert "Score by group" in shown.output and "Score by subject" in shown.output and "STEM" in shown.output
    assert "1.000" in shown.output
    as_json = json.loads(CliRunner().invoke(cli, ["evals", "show", str(mmlu_eval.pk), "--json"], env=env, obj={}).stdout)
    assert {g["name"] for g in as_json["categories"]["group"]} <= {"STEM", "humanities", "social sciences", "other"}


def test_the_paired_comparison_breaks_its_delta_down_by_category(api, owner_client, project, owner, fake, mmlu_eval):
    fake.answer = lambda question: f"Answer: {ROWS[question].reference}"
    # The same deployment answering better: asked again, not served its first answers from the response cache.
    better = create_eval(project, owner, deployment=mmlu_eval.deployment, same_rows_as=mmlu_eval, cache="bypass")
    run_eval(better.pk)
    body = api.get(f"/api/v1/evals/{mmlu_eval.pk}/compare/{better.pk}").json()
    groups = {g["name"]: g for g in body["by_category"]["group"]}
    assert groups["STEM"]["delta"] == 0 and groups["STEM"]["a"] == groups["STEM"]["b"] == 1.0
    others = [g for name, g in groups.items() if name != "STEM"]
    assert others and all(g["delta"] == 1.0 and g["a"] == 0.0 for g in others)
    assert sum(g["n"] for g in groups.values()) == body["n"] == 60
    biggest = max(others, key=lambda g: g["n"])
    assert biggest["mcnemar_p"] == statistics.mcnemar_exact(biggest["n"], 0)
    assert biggest["verdict"] == ("better" if biggest["mcnemar_p"] < 0.05 else "not decisive")
    page = owner_client.get(f"/evals/{mmlu_eval.pk}/compare/{better.pk}/").content.decode()
    assert 'id="delta-by-group"' in page and "+1.000" in page


def test_a_math500_eval_scores_by_level_and_subject(api, project, owner, fake, deployment):
    answers = {math500.TEMPLATE.format(problem=row.input): row.reference for row in math500.BENCHMARK.rows()}
    fake.answer = lambda prompt: f"Therefore, the final answer is: $\\boxed{{{answers[prompt]}}}$. I hope it is correct"
    ev = create_eval(project, owner, deployment=deployment, benchmark="math500", sample_limit=8, seed=1)
    run_eval(ev.pk)
    body = api.get(f"/api/v1/evals/{ev.pk}").json()
    assert (body["status"], body["score"], body["error_count"]) == ("succeeded", 1.0, 0)
    assert list(body["categories"]) == ["level", "subject"]
    assert sum(level["n"] for level in body["categories"]["level"]) == 8
    assert all(level["name"].startswith("Level ") and level["score"] == 1.0 for level in body["categories"]["level"])
