"""The host's egress proxy (`manage.py egress_proxy`) for tests whose sandboxes use the default `egress` network."""

import subprocess
import sys
import time

import pytest


@pytest.fixture
def egress_proxy(settings, live_server, subprocess_env, tmp_path_factory):
    """Harness runs go out through a real egress proxy: the platform (the live server) and 127.0.0.1,
    where the tests' fake model servers listen, are allowed besides the public internet."""
    socket_dir = tmp_path_factory.mktemp("egress")
    settings.HARNESS_SANDBOX_NETWORK = "egress"
    settings.BELVEDIR_BASE_URL = live_server.url
    settings.EGRESS_SOCKET_DIR = socket_dir
    env = {
        **subprocess_env,
        "BELVEDIR_BASE_URL": live_server.url,
        "BELVEDIR_EGRESS_SOCKET_DIR": str(socket_dir),
        "BELVEDIR_EGRESS_ALLOW_NETWORKS": "127.0.0.1/32",
    }
    process = subprocess.Popen([sys.executable, "manage.py", "egress_proxy"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 30
    while not (socket_dir / "proxy.sock").exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"the egress proxy did not start: {process.stdout.read()[-2000:]}")
        time.sleep(0.1)
    yield process
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
