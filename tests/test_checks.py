import pytest
from django.core.checks import run_checks

from belvedir import settings as settings_module


def ids(settings):
    return {message.id for message in run_checks()}


def test_it_reports_unparseable_environment_values(settings):
    settings.CONFIG_ERRORS = ["BELVEDIR_SANDBOX_MEMORY_MB='lots' is not an integer."]
    messages = [m for m in run_checks() if m.id == "belvedir.E001"]
    assert messages and "lots" in messages[0].msg


def test_it_requires_a_secret_key_outside_debug(settings):
    settings.SECRET_KEY = ""
    assert "belvedir.E002" in ids(settings)


def test_it_reports_a_bad_docker_url(settings):
    settings.SANDBOX_DOCKER_URL = "docker.example"
    assert "belvedir.E003" in ids(settings)


def test_it_warns_about_bridge_networking(settings):
    settings.SANDBOX_NETWORK = "bridge"
    assert "belvedir.W001" in ids(settings)


def test_host_networking_for_harnesses_is_an_error_outside_debug(settings):
    settings.HARNESS_SANDBOX_NETWORK = "host"
    settings.DEBUG = True
    assert "belvedir.E005" not in ids(settings)
    settings.DEBUG = False
    assert "belvedir.E005" in ids(settings)


def test_it_warns_about_bridge_networking_for_harnesses_too(settings):
    settings.HARNESS_SANDBOX_NETWORK = "bridge"
    assert "belvedir.W001" in ids(settings)


@pytest.mark.django_db
def test_it_warns_about_a_host_running_untrusted_code_under_runc(settings):
    from belvedir.sandbox.models import SandboxHost

    SandboxHost.objects.update(runtime="auto")
    assert "belvedir.W002" not in ids(settings)
    SandboxHost.objects.create(name="old-box", url="tcp://10.1.2.3:2376", runtime="runc")
    messages = [m for m in run_checks() if m.id == "belvedir.W002"]
    assert len(messages) == 1 and "old-box" in messages[0].msg


@pytest.mark.django_db
def test_it_warns_about_a_tcp_host_without_a_tls_client_certificate(settings):
    from belvedir.sandbox.models import SandboxHost

    SandboxHost.objects.create(name="open-port", url="tcp://10.1.2.3:2375")
    SandboxHost.objects.create(name="mutual-tls", url="tcp://10.1.2.4:2376", tls_cert="/etc/b/cert.pem", tls_key="/etc/b/key.pem")
    messages = [m for m in run_checks() if m.id == "belvedir.W003"]
    assert [m.msg.split("'")[1] for m in messages] == ["open-port"]


@pytest.mark.django_db
def test_it_warns_about_accounts_named_like_an_email_address(settings, django_user_model):
    django_user_model.objects.create_user(username="plain")
    assert "belvedir.W004" not in ids(settings)
    django_user_model.objects.create_user(username="someone@example.test")
    messages = [m for m in run_checks() if m.id == "belvedir.W004"]
    assert len(messages) == 1 and "'someone@example.test'" in messages[0].msg and "plain" not in messages[0].msg


def test_the_fake_backend_is_never_the_default_where_it_is_not_allowed(settings):
    settings.SANDBOX_DEFAULT_BACKEND = "fake"
    assert "belvedir.E006" not in ids(settings)  # tests allow it (conftest)
    settings.SANDBOX_ALLOW_FAKE_BACKEND = False
    assert "belvedir.E006" in ids(settings)


def test_check_deploy_refuses_a_platform_that_allows_the_fake_backend(settings):
    assert "belvedir.E007" in {m.id for m in run_checks(include_deployment_checks=True)}
    settings.SANDBOX_ALLOW_FAKE_BACKEND = False
    assert "belvedir.E007" not in {m.id for m in run_checks(include_deployment_checks=True)}


def test_a_clean_configuration_has_no_belvedir_messages(settings):
    assert not {i for i in ids(settings) if i.startswith("belvedir.")}


@pytest.mark.parametrize(
    "helper, raw, default, expected, error",
    [
        (settings_module.env_int, "12", 3, 12, False),
        (settings_module.env_int, "twelve", 3, 3, True),
        (settings_module.env_int, "-1", 3, 3, True),
        (settings_module.env_bool, "yes", False, True, False),
        (settings_module.env_bool, "maybe", False, False, True),
        (settings_module.env_float, "0.5", 1.0, 0.5, False),
        (settings_module.env_float, "x", 1.0, 1.0, True),
    ],
)
def test_env_helpers_parse_or_record_an_error(monkeypatch, helper, raw, default, expected, error):
    monkeypatch.setenv("BV_TEST_VALUE", raw)
    monkeypatch.setattr(settings_module, "CONFIG_ERRORS", [])
    # The helpers record each name they read: this test's own is no setting (test_environment.py checks that list).
    monkeypatch.setattr(settings_module, "ENV_VARIABLES", set())
    kwargs = {"minimum": 0} if helper is settings_module.env_int else {}
    assert helper("BV_TEST_VALUE", default, **kwargs) == expected
    assert bool(settings_module.CONFIG_ERRORS) is error


def _settings_read_from(monkeypatch, tmp_path, **env):
    """belvedir/settings.py run afresh (not the suite's settings) in an environment holding only `env`."""
    import runpy

    from django.conf import settings as django_settings

    for name in django_settings.ENV_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in {"BELVEDIR_VAR_DIR": str(tmp_path), **env}.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(str(django_settings.BASE_DIR / "belvedir" / "settings.py"))


def test_debug_is_off_unless_set(monkeypatch, tmp_path):
    production = _settings_read_from(monkeypatch, tmp_path)
    assert production["DEBUG"] is False and production["SECRET_KEY"] == "" and production["SECURE_SSL_REDIRECT"] is True
    assert _settings_read_from(monkeypatch, tmp_path, DEBUG="1")["DEBUG"] is True


def test_two_commands_starting_at_once_agree_on_one_development_key(monkeypatch, tmp_path):
    """`make test` starts two manage.py commands at once on a fresh clone: one read
    an empty key while the other was writing it (CI: belvedir.E002 with DEBUG=1)."""
    import secrets

    development = _settings_read_from(monkeypatch, tmp_path, DEBUG="1")
    (tmp_path / "secret_key").unlink()
    generate, second = secrets.token_urlsafe, []

    def arrives_meanwhile(nbytes):
        if not second:
            second.append(None)
            second[0] = development["_secret_key"]()  # the other command, while the first has no file yet
        return generate(nbytes)

    monkeypatch.setattr(secrets, "token_urlsafe", arrives_meanwhile)
    first = development["_secret_key"]()
    assert len(first) > 40 and first == second[0]
    assert (tmp_path / "secret_key").stat().st_mode & 0o777 == 0o600
    assert [path.name for path in tmp_path.iterdir() if "secret" in path.name] == ["secret_key"]


def test_private_deployments_are_off_unless_set_whatever_debug_says(monkeypatch, tmp_path):
    assert _settings_read_from(monkeypatch, tmp_path)["EVAL_ALLOW_PRIVATE_URLS"] is False
    assert _settings_read_from(monkeypatch, tmp_path, DEBUG="1")["EVAL_ALLOW_PRIVATE_URLS"] is False
    assert _settings_read_from(monkeypatch, tmp_path, BELVEDIR_ALLOW_PRIVATE_DEPLOYMENTS="1")["EVAL_ALLOW_PRIVATE_URLS"] is True


def _production_section():
    """docs/running/production.md, less its title: the recipe an operator follows."""
    from django.conf import settings as django_settings

    return (django_settings.BASE_DIR / "docs" / "running" / "production.md").read_text().split("\n", 1)[1]


def test_the_documented_production_recipe_passes_check_deploy(subprocess_env):
    import re
    import subprocess
    import sys

    from django.conf import settings as django_settings

    section = _production_section()
    recipe = section.strip().split("\n\n", 1)[0]
    names = re.findall(r"`([A-Z_]+)(?:=([^`]*))?`", recipe)
    assert {name for name, _ in names} >= {"DEBUG", "SECRET_KEY", "DATABASE_URL", "REDIS_URL", "ALLOWED_HOSTS", "BELVEDIR_BASE_URL"}, recipe
    values = {"SECRET_KEY": "production-check-" + "x" * 50, "DATABASE_URL": subprocess_env["DATABASE_URL"], "REDIS_URL": "redis://127.0.0.1:6379/15"}
    # Exactly the recipe's variables: none of the others settings.py reads.
    env = {key: value for key, value in subprocess_env.items() if key not in django_settings.ENV_VARIABLES}
    env.update({name: value or values[name] for name, value in names})
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout
    assert not re.search(r"WARNING|\?: \(", result.stdout + result.stderr), result.stdout + result.stderr


def test_the_documented_production_setup_runs_every_setup_command_make_run_does():
    """Each `manage.py` command scripts/run.sh runs is in the Production section's commands, but the demo's."""
    import re

    from django.conf import settings as django_settings

    run_sh = (django_settings.BASE_DIR / "scripts" / "run.sh").read_text()
    ran = set(re.findall(r"manage\.py (\w+)", run_sh))
    if "demo_setup --migrate" in run_sh:
        ran.add("migrate")  # the database migrated in the demo's Python process
    assert {"install_benchmark_data", "migrate", "build_sandbox_image", "qcluster", "egress_proxy"} <= ran, run_sh
    section = _production_section()
    blocks = "\n".join(re.findall(r"```sh\n(.*?)```", section, re.S))
    listed = set(re.findall(r"manage\.py (\w+)", blocks))
    # demo_setup makes the demo account `make run` prints: a production has none.
    assert ran - {"demo_setup"} <= listed, ran - listed
    # The web server scripts/run.sh starts (scripts/web.sh) and the compiled modules scripts/venv.sh builds.
    assert "gunicorn belvedir.wsgi" in blocks and "scripts/compile.py" in blocks
