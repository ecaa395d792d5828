"""Run this host's egress proxy: proxy.py on a unix socket, with the policy plugin.

One per Docker host, beside the engine. Sandboxes reach it only through the
socket directory mounted into them.
"""

import os
import signal
import threading

import proxy
from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import connections

from belvedir.sandbox.egress import socket_path


class Command(BaseCommand):
    help = "Run the egress proxy that harness sandboxes on the `egress` network go through."

    def handle(self, *args, **options):
        path = socket_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        # The directory is mounted into sandboxes: readable by all, writable by no sandbox.
        path.parent.chmod(0o755)
        if path.exists():
            path.unlink()  # left by a proxy that did not exit cleanly
        # proxy.py forks its acceptor: it must not inherit a database connection.
        connections.close_all()
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        flags = [
            "--unix-socket-path",
            str(path),
            # One process, a thread per connection: the plugin's byte counts
            # and caps live in that process (see egress/recorder.py).
            "--threaded",
            "--num-acceptors",
            "1",
            # proxy.py's handler with a bound on what one request holds (egress/handler.py).
            "--work-klass",
            "belvedir.sandbox.egress.handler.BoundedRequestHandler",
            "--plugins",
            "belvedir.sandbox.egress.plugin.EgressPolicyPlugin",
            "--log-level",
            "WARNING",
            "--timeout",
            str(settings.EGRESS_IDLE_TIMEOUT_SECONDS),
        ]
        with proxy.Proxy(flags):
            # Every sandbox uid connects through the forwarder; the policy, not
            # the file mode, decides who gets out.
            os.chmod(path, 0o666)
            self.stdout.write(f"Egress proxy listening on {path}", ending="\n")
            self.stdout.flush()
            stop.wait()
