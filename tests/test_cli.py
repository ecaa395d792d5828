"""`bv` against a live test server: each command's happy path and its clear errors."""

import json
import stat

import pytest
from click.testing import CliRunner

from belvedir_cli.main import cli
from billing.models import Coupon
from evals.benchmarks import gsm8k
from evals.models import Deployment
from harnesses.models import Harness

from .fakes.openai_server import FakeOpenAI
from .harness_fixtures import fund, make_repo

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("loopback_deployments")]


@pytest.fixture
def bv(live_server, api_key, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))

    def run(*args, key=api_key, base_url=live_server.url, input=None):
        env = {"BELVEDIR_API_KEY": key or "", "BELVEDIR_BASE_URL": base_url}
        return CliRunner().invoke(cli, list(args), env=env, input=input, obj={})

    return run


def test_whoami_balance_and_coupons(bv, project):
    Coupon.objects.create(code="CLI10", amount_cents=1000)
    who = bv("whoami")
    assert who.exit_code == 0 and "alice" in who.output
    redeemed = bv("coupons", "redeem", "cli10")
    assert redeemed.exit_code == 0 and "$10.00" in redeemed.output
    body = json.loads(bv("balance", "--json").stdout)
    assert body["balance_cents"] == 1000 and body["entries"][0]["kind"] == "coupon"
    again = bv("coupons", "redeem", "cli10")
    assert again.exit_code == 2 and "already redeemed" in again.output


def test_login_stores_the_key_with_mode_600(bv, api_key, live_server, tmp_path):
    result = bv("login", key=None, input=f"{api_key}\n{live_server.url}\n")
    assert result.exit_code == 0, result.output
    from belvedir_cli.client import config_path

    path = config_path()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text())["api_key"] == api_key
    assert bv("whoami", key=None).exit_code == 0  # uses the stored key


@pytest.mark.parametrize("args", [("whoami",), ("balance",), ("presets", "list"), ("harnesses", "list"), ("models", "list")])
def test_a_bad_key_is_a_clear_error(bv, args):
    result = bv(*args, key="bv_live_" + "x" * 43)
    assert result.exit_code == 2 and "401" in result.output and "Unknown API key" in result.output


def test_an_unreachable_server_is_a_clear_error(bv):
    result = bv("whoami", base_url="http://127.0.0.1:9")
    assert result.exit_code == 2 and "Cannot reach Belvedir at http://127.0.0.1:9" in result.output


def test_no_key_at_all(bv):
    result = bv("whoami", key="")
    assert result.exit_code == 2 and "bv login" in result.output


def test_catalog_listings(bv, project):
    from harnesses.models import Preset

    # The test owns its catalog: a transactional test earlier in the run may
    # have flushed the seeded one.
    Preset.objects.all().delete()
    Preset.objects.create(
        slug="cli-cpu", name="CLI CPU", description="d", repo_url="https://x.example/a", install_command="true", run_command="true", position=1
    )
    Preset.objects.create(
        slug="cli-gpu",
        name="CLI GPU",
        description="d",
        repo_url="https://x.example/b",
        install_command="true",
        run_command="true",
        compute_type="gpu",
        gpu_type="A10G",
        env_var_names=["HF_TOKEN"],
        needs_tasks=True,
        position=2,
    )
    presets = json.loads(bv("presets", "list", "--json").stdout)
    assert [(p["slug"], p["compute_type"], p["env_var_names"], p["needs_tasks"]) for p in presets] == [
        ("cli-cpu", "cpu", [], False),
        ("cli-gpu", "gpu", ["HF_TOKEN"], True),
    ]
    table = bv("presets", "list").output
    assert "CLI CPU" in table and "CLI GPU" in table
    benchmarks = {b["name"] for b in json.loads(bv("benchmarks", "list", "--json").stdout)}
    assert benchmarks == {"gsm8k", "humaneval", "mmlu", "arc_challenge", "hellaswag", "winogrande", "math500", "mbpp", "bfcl", "ifbench", "mt_bench"}
    assert "gsm8k" in bv("benchmarks", "list").output
    scorers = {s["name"]: s for s in json.loads(bv("scorers", "list", "--json").stdout)}
    assert set(scorers) == {"exact_match", "contains", "regex", "last_number", "json_valid", "llm_judge"} and scorers["llm_judge"]["needs_judge"]
    assert "pattern (string" in bv("scorers", "list").output


def answers_right_first(n):
    """A model that answers its first n gsm8k questions right and every later one wrong (no gsm8k answer is 0)."""
    references = {row["input"]: row["reference"] for row in gsm8k.rows()}
    asked = []

    def answer(question):
        if question not in references:
            return "OK"
        asked.append(question)
        return f"#### {references[question]}" if len(asked) <= n else "#### 0"

    return answer


def test_deployments_and_evals(bv, project, worker):
    with FakeOpenAI(answer=answers_right_first(5)) as fake:
        created = bv("deployments", "create", "--name", "fake", "--base-url", fake.url, "--model", "m", "--json")
        assert created.exit_code == 0, created.output
        assert "fake" in bv("deployments", "list").output
        run = bv("evals", "run", "gsm8k", "--deployment", "fake", "--n", "20", "--wait", "--json")
        ev = json.loads(run.stdout)
        assert ev["status"] == "succeeded" and ev["done_count"] == 20, run.output
        assert run.exit_code == 0
        shown = json.loads(bv("evals", "show", str(ev["id"]), "--json").output)
        assert (shown["total"], shown["score"]) == (20, 0.25)
        wrong = json.loads(bv("evals", "samples", str(ev["id"]), "--wrong", "--json").output)
        assert len(wrong) == 15
        unknown = bv("evals", "run", "gsm8k", "--deployment", "nope")
        assert unknown.exit_code == 2 and "No deployment 'nope'" in unknown.output
        assert bv("evals", "run").exit_code == 2  # usage


def test_an_eval_whose_rows_all_errored_exits_1_with_its_reason(bv, project, worker, settings):
    settings.EVAL_RETRY_BASE_SECONDS = 0.01
    with FakeOpenAI() as stopped:
        Deployment.objects.create(project=project, name="gone", base_url=stopped.url, model="m")
    run = bv("evals", "run", "gsm8k", "--deployment", "gone", "--n", "3", "--wait", "--json")
    ev = json.loads(run.stdout)
    assert (ev["status"], ev["error_count"], run.exit_code) == ("failed", 3, 1), run.output
    assert "3 of its 3 rows errored" in ev["status_message"]


def test_evals_run_from_a_config_file(bv, project, tmp_path, worker):
    with FakeOpenAI(answer=lambda q: "#### 1") as fake:
        Deployment.objects.create(project=project, name="fake", base_url=fake.url, model="m")
        config = tmp_path / "eval.yaml"
        config.write_text("benchmark: gsm8k\ndeployment: fake\nsample_limit: 5\nseed: 11\n")
        result = bv("evals", "run", "-f", str(config), "--wait", "--json")
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["sample_limit"] == 5
        bad = tmp_path / "bad.yaml"
        bad.write_text("benchmark: gsm8k\ndataset_id: 1\ndeployment: fake\n")
        refused = bv("evals", "run", "-f", str(bad))
        assert refused.exit_code == 2 and "dataset_id" in refused.output


def test_harnesses_and_runs(bv, project, owner, tmp_path, settings, monkeypatch):
    settings.HARNESS_ALLOW_LOCAL_REPOS = True
    fund(project, 1000)
    spec = tmp_path / "harness.yaml"
    spec.write_text(f"name: cli-harness\nrepo_url: {tmp_path / 'repo'}\ninstall_command: 'true'\nrun_command: python3 run.py\n")
    created = bv("harnesses", "create", "-f", str(spec), "--json")
    assert created.exit_code == 0, created.output
    assert "cli-harness" in bv("harnesses", "list").output
    unknown = bv("runs", "start", "no-such-harness")
    assert unknown.exit_code == 2 and "No harness named 'no-such-harness'" in unknown.output
    started = json.loads(bv("runs", "start", "cli-harness", "--json").stdout)
    assert started["status"] == "queued"
    cancelled = bv("runs", "cancel", str(started["id"]), "--json")
    assert json.loads(cancelled.stdout)["status"] == "cancelled"
    assert bv("runs", "cancel", str(started["id"])).exit_code == 2  # already ended: 409


@pytest.mark.docker
def test_runs_start_wait_and_logs(bv, project, owner, tmp_path, settings, worker, egress):
    from belvedir.sandbox.models import SandboxHost

    SandboxHost.objects.get_or_create(name="local", defaults={"url": settings.SANDBOX_DOCKER_URL})
    settings.HARNESS_ALLOW_LOCAL_REPOS = True
    fund(project, 1000)
    make_repo(tmp_path / "ok", {"run.py": "import json; print('hello from cli run'); json.dump({'score': 3}, open('results.json','w'))"})
    make_repo(tmp_path / "bad", {"run.py": "raise SystemExit(4)"})
    Harness.objects.create(project=project, name="ok", repo_url=str(tmp_path / "ok"), install_command="true", run_command="python3 run.py")
    Harness.objects.create(project=project, name="bad", repo_url=str(tmp_path / "bad"), install_command="true", run_command="python3 run.py")
    ok = bv("runs", "start", "ok", "--wait", "--json")
    assert ok.exit_code == 0 and json.loads(ok.stdout)["score"] == 3.0, ok.output
    run_id = json.loads(ok.stdout)["id"]
    logs = bv("runs", "logs", str(run_id), "--follow")
    assert "hello from cli run" in logs.output
    bad = bv("runs", "start", "bad", "--wait")
    assert bad.exit_code == 1  # the run failed


def test_models(bv, project, settings, tmp_path):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from finetunes.models import FineTunedModel
    from harnesses.models import Run

    settings.MEDIA_ROOT = tmp_path / "media"
    model = FineTunedModel(project=project, name="tuned", base_model="org/base")
    model.adapter.save("a.zip", SimpleUploadedFile("a.zip", b"PK\x05\x06" + b"\0" * 18), save=False)
    model.save()
    harness = Harness.objects.create(
        project=project, name="lm-eval", repo_url="https://x.org/a/b", install_command="true", run_command="true", compute_type="gpu"
    )
    Run.objects.create(project=project, harness=harness, compute_type="gpu", price_cents=500, status="succeeded", score=0.6, model_label="tuned")
    assert "tuned" in bv("models", "list").output
    benchmarks = json.loads(bv("models", "benchmarks", "tuned", "--json").stdout)
    assert [(b["harness"], b["score"]) for b in benchmarks] == [("lm-eval", 0.6)]
    missing = bv("models", "benchmarks", "nope")
    assert missing.exit_code == 2 and "No model named 'nope'" in missing.output


def test_runs_start_with_repeats_charges_each_run(bv, project):
    from billing.models import Account

    fund(project, 200)
    Harness.objects.create(project=project, name="rep", repo_url="https://example.org/a/b", install_command="true", run_command="true")
    started = bv("runs", "start", "rep", "--repeats", "3", "--json")
    assert started.exit_code == 0, started.output
    assert len(json.loads(started.stdout)) == 3 and Account.balance_for(project) == 50
    short = bv("runs", "start", "rep", "--repeats", "2")
    assert short.exit_code == 2 and "402" in short.output


def test_runs_show_says_where_a_secret_reached_the_runs_output(bv, project):
    from harnesses.models import Run
    from harnesses.redaction import CANARY_ENV, Place

    harness = Harness.objects.create(project=project, name="leaky", repo_url="https://example.org/a/b", install_command="true", run_command="true")
    leaked = Run.objects.create(
        project=project,
        harness=harness,
        price_cents=50,
        status="succeeded",
        score=1,
        secret_places={"API_TOKEN": int(Place.LOG), CANARY_ENV: int(Place.LOG | Place.SPANS)},
    )
    careful = Run.objects.create(project=project, harness=harness, price_cents=50, status="succeeded", score=1)
    shown = bv("runs", "show", str(leaked.pk))
    assert shown.exit_code == 0, shown.output
    assert "leaky" in shown.stdout and f"a secret reached its output: API_TOKEN in log; {CANARY_ENV} in log, spans;" in shown.stdout
    shown_json = json.loads(bv("runs", "show", str(leaked.pk), "--json").stdout)
    assert shown_json["secret_reached_output"] == ["log", "spans"]
    assert shown_json["secrets_reached_output"] == [{"name": "API_TOKEN", "places": ["log"]}, {"name": CANARY_ENV, "places": ["log", "spans"]}]
    quiet = bv("runs", "show", str(careful.pk))
    assert quiet.exit_code == 0 and "leaky" in quiet.stdout and "secret" not in quiet.stdout
    assert bv("runs", "show", "999999").exit_code == 2
