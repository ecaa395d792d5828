"""A second, real Docker engine on this machine, standing in for a remote sandbox host.

It has its own unix socket, data root, exec root and pidfile, and listens on
a TCP port on 127.0.0.1 that requires TLS client certificates, made here
with the openssl CLI. It only ever stops the process it started: the main
engine (the pid in /var/run/docker.pid) is never signalled.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

IMAGE = "belvedir-sandbox:bookworm"


@dataclass
class Certificates:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def make_certificates(directory: Path) -> Certificates:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, all signed by the CA."""
    directory.mkdir(parents=True, exist_ok=True)

    def openssl(*args):
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca-key.pem", "-out", "ca.pem", "-days", "2", "-subj", "/CN=belvedir test CA")
    (directory / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    (directory / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    for name, subject in (("server", "/CN=127.0.0.1"), ("client", "/CN=belvedir worker")):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}-key.pem", "-out", f"{name}.csr", "-subj", subject)
        openssl(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca-key.pem",
            "-CAcreateserial",
            "-out",
            f"{name}.pem",
            "-days",
            "2",
            "-extfile",
            f"{name}.ext",
        )
    return Certificates(directory / "ca.pem", directory / "server.pem", directory / "server-key.pem", directory / "client.pem", directory / "client-key.pem")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SecondEngine:
    def __init__(self, root: Path):
        self.root = root
        self.socket = root / "docker.sock"
        self.pidfile = root / "docker.pid"
        self.port = free_port()
        self.certs = make_certificates(root / "certs")
        self.process: subprocess.Popen | None = None
        config = {"runtimes": {"runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none", "--host-uds=open"]}}}
        (root / "daemon.json").write_text(json.dumps(config))

    @property
    def unix_url(self) -> str:
        return f"unix://{self.socket}"

    @property
    def tcp_url(self) -> str:
        return f"tcp://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60):
        assert self.process is None or self.process.poll() is not None
        command = [
            "dockerd",
            f"--config-file={self.root / 'daemon.json'}",
            f"--data-root={self.root / 'data'}",
            f"--exec-root={self.root / 'exec'}",
            f"--pidfile={self.pidfile}",
            f"--host={self.unix_url}",
            f"--host={self.tcp_url}",
            "--tlsverify",
            f"--tlscacert={self.certs.ca}",
            f"--tlscert={self.certs.server_cert}",
            f"--tlskey={self.certs.server_key}",
            "--bridge=none",
            "--iptables=false",
            "--ip6tables=false",
        ]
        log = open(self.root / "dockerd.log", "ab")
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the second dockerd exited: {(self.root / 'dockerd.log').read_text()[-2000:]}")
            if self._answers():
                return
            time.sleep(0.3)
        raise RuntimeError("the second dockerd did not answer in time")

    def _answers(self) -> bool:
        return subprocess.run(["docker", "-H", self.unix_url, "version"], capture_output=True).returncode == 0

    def stop(self, timeout: float = 60):
        """SIGTERM to the dockerd this object started (never the main one), then wait for it."""
        if self.process is None or self.process.poll() is not None:
            return
        assert self.process.pid != _main_dockerd_pid()
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)

    def load_image(self, tag: str = IMAGE):
        saved = subprocess.Popen(["docker", "save", tag], stdout=subprocess.PIPE)
        subprocess.run(["docker", "-H", self.unix_url, "load", "-q"], stdin=saved.stdout, check=True, capture_output=True)
        saved.stdout.close()
        assert saved.wait() == 0

    def tls_engine(self):
        """This engine over TCP, with the CA and client certificate as PEMs (as a SandboxHost stores them)."""
        from belvedir.sandbox.engine import Engine

        certs = self.certs
        return Engine(self.tcp_url, ca=certs.ca.read_text(), cert=certs.client_cert.read_text(), key=certs.client_key.read_text())

    def containers(self) -> list[str]:
        out = subprocess.run(["docker", "-H", self.unix_url, "ps", "-aq"], capture_output=True, text=True, check=True).stdout
        return out.split()


@contextmanager
def second_engine_running(root: Path):
    """A started second engine with the sandbox image loaded; stopped, and its data root removed, after."""
    engine = SecondEngine(root)
    engine.start()
    try:
        engine.load_image()
        yield engine
    finally:
        engine.stop()
        shutil.rmtree(engine.root / "data", ignore_errors=True)  # the loaded image: hundreds of MB


def _main_dockerd_pid() -> int | None:
    try:
        return int(Path("/var/run/docker.pid").read_text().strip())
    except (OSError, ValueError):
        return None


if __name__ == "__main__":  # a manual try: python -m tests.second_engine /tmp/dir
    import sys

    engine = SecondEngine(Path(sys.argv[1]))
    engine.start()
    engine.load_image()
    print(engine.tcp_url, engine.certs, flush=True)
    try:
        signal.pause()
    finally:
        engine.stop()
        os._exit(0)
