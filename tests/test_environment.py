"""The suite's environment: what a developer's shell or a deployment holds changes no test.

pytest.ini pins it (pytest-env, before Django reads its settings): DEBUG on,
every other variable belvedir/settings.py reads removed but where things are.
Subprocesses get the same from tests/servers.py's subprocess_environ().
"""

import json
import subprocess
import sys

import pytest
from django.conf import settings

from .servers import REPO, subprocess_environ

# Where things are on this machine, not how the platform behaves: kept from the environment.
KEPT = {"DATABASE_URL", "DOCKER_HOST", "BELVEDIR_VAR_DIR", "BELVEDIR_BENCHMARK_DATA_DIR", "BELVEDIR_BENCHMARK_WHEEL_DIR"}

# What an acceptance run, a deployment or a developer's shell may hold, each
# a value that changed a test's outcome or would.
HOSTILE = {
    "DEBUG": "0",
    "SECRET_KEY": "hostile-" + "k" * 50,
    "STRIPE_SECRET_KEY": "sk_test_hostile",
    "STRIPE_WEBHOOK_SECRET": "whsec_hostile",
    "STRIPE_API_BASE": "http://127.0.0.1:1",
    "BELVEDIR_ALLOW_LOCAL_REPOS": "1",
    "BELVEDIR_ALLOW_PRIVATE_DEPLOYMENTS": "1",
    "BELVEDIR_HARNESS_NETWORK": "none",
    "BELVEDIR_SANDBOX_NETWORK": "bridge",
    "BELVEDIR_PRESET_ORG": "https://github.com/hostile",
    "BELVEDIR_BASE_URL": "https://belvedir.example.com",
    "REDIS_URL": "redis://127.0.0.1:1/0",
    "SECURE_SSL_REDIRECT": "1",
    "ALLOWED_HOSTS": "belvedir.example.com",
    "Q_WORKERS": "7",
    "BELVEDIR_RUN_PRICE_CPU_CENTS": "1",
}

# What the suite runs on, whatever the environment: the production defaults, DEBUG on.
PINNED = {
    "DEBUG": True,
    "STRIPE_SECRET_KEY": "",
    "STRIPE_WEBHOOK_SECRET": "",
    "STRIPE_API_BASE": "",
    "HARNESS_ALLOW_LOCAL_REPOS": False,
    "EVAL_ALLOW_PRIVATE_URLS": False,
    "HARNESS_SANDBOX_NETWORK": "egress",
    "SANDBOX_NETWORK": "none",
    "PRESET_REPO_ORG": "",
    "BELVEDIR_BASE_URL": "http://127.0.0.1:8000",
    "REDIS_URL": "",
    "SECURE_SSL_REDIRECT": False,
    "ALLOWED_HOSTS": ["*"],
    "Q_WORKERS": 2,
    "RUN_PRICE_CPU_CENTS": 50,
}

PROBE = f"""
import json
from django.conf import settings
print(json.dumps({{name: settings.Q_CLUSTER["workers"] if name == "Q_WORKERS" else getattr(settings, name) for name in {sorted(PINNED)!r}}}))
"""


def _pinned_in_pytest_ini(config):
    lines = [line.strip() for line in config.getini("env")]
    unset = {line.removeprefix("U:") for line in lines if line.startswith("U:")}
    assigned = dict(line.split("=", 1) for line in lines if not line.startswith("U:"))
    return unset, assigned


def test_every_variable_the_settings_read_is_pinned_for_the_suite(request):
    unset, assigned = _pinned_in_pytest_ini(request.config)
    assert assigned == {"DEBUG": "1"}
    # A variable added to settings.py without a line in pytest.ini fails here.
    assert unset == settings.ENV_VARIABLES - KEPT - {"DEBUG"}


def test_the_suite_runs_on_the_production_defaults():
    """Run in-process by the next test under a hostile environment: the values pytest.ini pins."""
    import belvedir.settings as module  # as read at import (pytest-django turns settings.DEBUG off for tests)

    seen = {name: settings.Q_CLUSTER["workers"] if name == "Q_WORKERS" else getattr(module, name) for name in PINNED}
    assert seen == PINNED


@pytest.mark.processes
def test_a_hostile_environment_changes_nothing_in_the_suite():
    env = {**subprocess_environ(), **HOSTILE}
    probe = f"{__file__}::test_the_suite_runs_on_the_production_defaults"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", probe], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "1 passed" in done.stdout


@pytest.mark.processes
def test_a_subprocess_sees_the_tests_values_not_the_environments(monkeypatch):
    for name, value in HOSTILE.items():
        monkeypatch.setenv(name, value)
    done = subprocess.run([sys.executable, "manage.py", "shell", "-c", PROBE], cwd=REPO, env=subprocess_environ(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == PINNED
