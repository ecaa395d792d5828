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
    SandboxHost.objects.create(name="old-box", docker_url="tcp://10.1.2.3:2376", runtime="runc")
    messages = [m for m in run_checks() if m.id == "belvedir.W002"]
    assert len(messages) == 1 and "old-box" in messages[0].msg


@pytest.mark.django_db
def test_it_warns_about_a_tcp_host_without_a_tls_client_certificate(settings):
    from belvedir.sandbox.models import SandboxHost

    SandboxHost.objects.create(name="open-port", docker_url="tcp://10.1.2.3:2375")
    SandboxHost.objects.create(name="mutual-tls", docker_url="tcp://10.1.2.4:2376", tls_cert="/etc/b/cert.pem", tls_key="/etc/b/key.pem")
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
    kwargs = {"minimum": 0} if helper is settings_module.env_int else {}
    assert helper("BV_TEST_VALUE", default, **kwargs) == expected
    assert bool(settings_module.CONFIG_ERRORS) is error


def test_the_readme_production_recipe_passes_check_deploy(subprocess_env):
    import re
    import subprocess
    import sys

    from django.conf import settings as django_settings

    readme = (django_settings.BASE_DIR / "README.md").read_text()
    recipe = next(line for line in readme.splitlines() if line.startswith("These processes, from the repository root"))
    recipe += readme.split(recipe, 1)[1].split("\n\n", 1)[0]
    names = re.findall(r"`([A-Z_]+)(?:=([^`]*))?`", recipe)
    assert {name for name, _ in names} >= {"DEBUG", "SECRET_KEY", "DATABASE_URL", "REDIS_URL"}, recipe
    values = {"SECRET_KEY": "production-check-" + "x" * 50, "DATABASE_URL": subprocess_env["DATABASE_URL"], "REDIS_URL": "redis://127.0.0.1:6379/15"}
    env = {key: value for key, value in subprocess_env.items() if not key.startswith(("SECURE_", "CSRF_", "DEBUG"))}
    env.update({name: value or values[name] for name, value in names})
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout
