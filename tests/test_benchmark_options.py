"""Per-eval benchmark options (mbpp's challenge_tests): declared by the benchmark, listed in the catalog,
chosen on the New Eval form, in the API and with `bv evals run --option`, stored on the eval; an unknown
name or a wrong type is a 400 and nothing is created."""

import json

import pytest
from click.testing import CliRunner

from belvedir_cli.main import benchmark_option, cli
from evals.actions import EvalConfigError, create_eval
from evals.benchmarks import gsm8k, mbpp
from evals.benchmarks.base import Option, OptionError
from evals.comparison import NotPaired, check_same_rows
from evals.models import Deployment, Eval
from evals.tasks import spec_for


@pytest.fixture
def deployment(project):
    # Never called: nothing here runs an eval.
    return Deployment.objects.create(project=project, name="fake", base_url="http://127.0.0.1:9/v1", model="fake-model")


def test_the_catalog_lists_each_benchmarks_options_with_type_default_and_help(api, owner_client):
    catalog = {b["name"]: b for b in api.get("/api/v1/benchmarks").json()}
    option = catalog["mbpp"]["options"]["challenge_tests"]
    assert (option["type"], option["default"]) == ("boolean", False) and "challenge_test_list" in option["help"]
    assert catalog["humaneval"]["options"] == {}
    assert "Option <code>challenge_tests</code> (boolean, default <code>false</code>)" in owner_client.get("/evals/benchmarks/").content.decode()


def test_an_eval_stores_every_option_defaults_included(api, deployment):
    chosen = api.post("/api/v1/evals", {"benchmark": "mbpp", "deployment": "fake", "benchmark_options": {"challenge_tests": True}}, format="json")
    assert chosen.status_code == 201 and chosen.json()["benchmark_options"] == {"challenge_tests": True}
    default = api.post("/api/v1/evals", {"benchmark": "mbpp", "deployment": "fake"}, format="json").json()
    assert default["benchmark_options"] == {"challenge_tests": False}
    assert api.post("/api/v1/evals", {"benchmark": "humaneval", "deployment": "fake"}, format="json").json()["benchmark_options"] == {}
    # What the engine scores with: the stored choice.
    assert spec_for(Eval.objects.get(pk=chosen.json()["id"])).option("challenge_tests") is True
    assert spec_for(Eval.objects.get(pk=default["id"])) is mbpp.BENCHMARK


@pytest.mark.parametrize(
    "benchmark, options, message",
    [
        ("mbpp", {"challenge": True}, "mbpp has no option 'challenge'; its options: challenge_tests (boolean)."),
        ("mbpp", {"challenge_tests": "yes"}, "mbpp's option challenge_tests takes a boolean, not 'yes'."),
        ("mbpp", {"challenge_tests": 1}, "mbpp's option challenge_tests takes a boolean, not 1."),
        ("humaneval", {"challenge_tests": True}, "humaneval has no option 'challenge_tests'; its options: none."),
    ],
)
def test_an_unknown_option_or_a_wrong_type_is_refused_and_nothing_is_created(api, deployment, benchmark, options, message):
    response = api.post("/api/v1/evals", {"benchmark": benchmark, "deployment": "fake", "benchmark_options": options}, format="json")
    assert response.status_code == 400 and response.json()["detail"] == message
    assert not Eval.objects.exists()


def test_options_that_are_not_a_mapping_or_go_with_a_dataset_are_refused(api, project, owner, deployment):
    from evals.datasets.versions import create_dataset

    listed = api.post("/api/v1/evals", {"benchmark": "mbpp", "deployment": "fake", "benchmark_options": ["challenge_tests"]}, format="json")
    assert listed.status_code == 400 and "benchmark_options" in listed.json()
    dataset = create_dataset(project, owner, "three", b'{"input": "a", "expected": "1"}\n' * 3)
    with pytest.raises(EvalConfigError, match="benchmark_options apply to a catalog benchmark"):
        create_eval(project, owner, deployment=deployment, dataset=dataset, scorers=["exact_match"], benchmark_options={"challenge_tests": True})
    assert not Eval.objects.exists()


def test_a_rerun_on_the_same_rows_keeps_the_options_and_evals_scored_with_others_are_not_compared(project, owner, deployment):
    first = create_eval(project, owner, deployment=deployment, benchmark="mbpp", sample_limit=5, benchmark_options={"challenge_tests": True})
    rerun = create_eval(project, owner, deployment=deployment, same_rows_as=first)
    assert rerun.benchmark_options == {"challenge_tests": True}
    check_same_rows(first, rerun)
    plain = create_eval(project, owner, deployment=deployment, same_rows_as=first, benchmark_options={})
    assert plain.benchmark_options == {"challenge_tests": False}
    with pytest.raises(NotPaired, match="with different options"):
        check_same_rows(first, plain)


def test_an_eval_stored_before_its_benchmark_had_an_option_is_compared_as_run_with_the_default(project, owner, deployment):
    old = create_eval(project, owner, deployment=deployment, benchmark="gsm8k", sample_limit=5)
    Eval.objects.filter(pk=old.pk).update(benchmark_options={})  # as stored before gsm8k's lm_eval_prompt
    old.refresh_from_db()
    check_same_rows(old, create_eval(project, owner, deployment=deployment, same_rows_as=old, benchmark_options={"lm_eval_prompt": False}))
    with pytest.raises(NotPaired, match="with different options"):
        check_same_rows(old, create_eval(project, owner, deployment=deployment, same_rows_as=old, benchmark_options={"lm_eval_prompt": True}))


def test_the_new_eval_form_offers_each_option_and_starts_the_eval_with_it(owner_client, deployment):
    form = owner_client.get("/evals/new/benchmark/").content.decode()
    assert 'name="option_mbpp_challenge_tests"' in form and "mbpp: challenge tests" in form
    posted = owner_client.post("/evals/new/benchmark/", {"benchmark": "mbpp", "deployment": deployment.pk, "option_mbpp_challenge_tests": "on"})
    assert posted.status_code == 302
    assert Eval.objects.get().benchmark_options == {"challenge_tests": True}
    # Another benchmark's option field is not this eval's choice.
    owner_client.post("/evals/new/benchmark/", {"benchmark": "humaneval", "deployment": deployment.pk, "option_mbpp_challenge_tests": "on"})
    assert Eval.objects.filter(benchmark="humaneval").get().benchmark_options == {}


@pytest.mark.django_db(transaction=True)
def test_bv_evals_run_takes_options(live_server, api_key, deployment, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    env = {"BELVEDIR_API_KEY": api_key, "BELVEDIR_BASE_URL": live_server.url}
    run = CliRunner().invoke(cli, ["evals", "run", "mbpp", "--deployment", "fake", "--n", "3", "--option", "challenge_tests=true", "--json"], env=env, obj={})
    assert run.exit_code == 0, run.output
    assert json.loads(run.stdout)["benchmark_options"] == {"challenge_tests": True}
    config = tmp_path / "eval.yaml"
    config.write_text("benchmark: mbpp\ndeployment: fake\nsample_limit: 3\nbenchmark_options:\n  challenge_tests: true\n")
    from_file = CliRunner().invoke(cli, ["evals", "run", "-f", str(config), "--json"], env=env, obj={})
    assert json.loads(from_file.stdout)["benchmark_options"] == {"challenge_tests": True}
    wrong = CliRunner().invoke(cli, ["evals", "run", "mbpp", "--deployment", "fake", "--option", "challenge_tests=maybe"], env=env, obj={})
    assert wrong.exit_code == 2 and "takes a boolean, not 'maybe'" in wrong.output
    assert Eval.objects.count() == 2
    malformed = CliRunner().invoke(cli, ["evals", "run", "mbpp", "--deployment", "fake", "--option", "challenge_tests"], env=env, obj={})
    assert malformed.exit_code == 2 and "NAME=VALUE" in malformed.output


def test_an_option_value_is_read_as_json_when_it_parses():
    assert benchmark_option("challenge_tests=true") == ("challenge_tests", True)
    assert benchmark_option("k=3") == ("k", 3) and benchmark_option("style=plain") == ("style", "plain") and benchmark_option("s=") == ("s", "")


def test_each_option_type_takes_only_its_own_values():
    flag, count, ratio, text = Option(False, ""), Option(1, ""), Option(0.5, ""), Option("a", "")
    assert flag.accepts(True) and not flag.accepts(1) and not flag.accepts("true")
    assert count.accepts(3) and not count.accepts(True) and not count.accepts(2.5)
    assert ratio.accepts(2) and ratio.accepts(0.1) and not ratio.accepts(False) and not ratio.accepts("0.1")
    assert text.accepts("b") and not text.accepts(1)
    assert mbpp.BENCHMARK.resolve_options({}) == {"challenge_tests": False}
    with pytest.raises(OptionError, match="must be a mapping"):
        gsm8k.BENCHMARK.resolve_options(["x"])


def test_a_configured_benchmark_shares_the_catalogs_rows():
    challenged = mbpp.BENCHMARK.configured({"challenge_tests": True})
    assert challenged is not mbpp.BENCHMARK and challenged.option("challenge_tests") is True
    assert mbpp.BENCHMARK.option("challenge_tests") is False  # the catalog's entry is unchanged
    assert challenged.rows() is mbpp.BENCHMARK.rows()
    assert mbpp.BENCHMARK.configured({"challenge_tests": False}) is mbpp.BENCHMARK
