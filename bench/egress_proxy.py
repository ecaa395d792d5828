"""What the egress proxy's per-connection grant check costs against a proxied request.

The proxy reads a connection's grant from the database for every new
connection (no cache, so a run's end refuses its credential at once). This
measures, in the same run on the same machine, each the median and p95 over
`--requests` sequential requests (one connection each, `Connection: close`),
the two proxies taking turns in rounds so that load drifts hit both alike:
- direct: a GET from this process to a local HTTP server on 127.0.0.2;
- proxied: the same GET through `manage.py egress_proxy`'s unix socket, with
  a live grant's credential (policy, the grant lookup, byte counting);
- cached: the same through a second proxy whose grant lookups are answered
  from memory after the first (the baseline: a check that costs nothing).
proxied / cached is what reading the grant per connection costs.

Usage: .venv/bin/python bench/egress_proxy.py [--requests 500]
Creates and drops a database `belvedir_bench_egress` (BENCH_DATABASE_NAME picks another).
"""

import argparse
import base64
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.throwaway import throwaway_database  # noqa: E402

OUTSIDE = "127.0.0.2"


class Hello(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "5")
        self.end_headers()
        self.wfile.write(b"hello")

    def log_message(self, *args):
        pass


def p95(values):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def timed(fn, count):
    times = []
    for _ in range(count):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return times


def get(connect, target: str, headers: str = "") -> bytes:
    with connect() as conn:
        conn.sendall(f"GET {target} HTTP/1.1\r\nHost: {OUTSIDE}\r\n{headers}Connection: close\r\n\r\n".encode())
        reply = b""
        while chunk := conn.recv(65536):
            reply += chunk
    assert reply.startswith(b"HTTP/1.0 200") or reply.startswith(b"HTTP/1.1 200"), reply[:200]
    return reply


# The baseline proxy: the same command, its grant lookups memoised (inherited by proxy.py's forked acceptor).
CACHED = """
import django
django.setup()
from belvedir.sandbox.egress import recorder
load, known = recorder.Recorder._load, {}
recorder.Recorder._load = lambda self, token_hash: known.get(token_hash) or known.setdefault(token_hash, load(self, token_hash))
from django.core.management import call_command
call_command("egress_proxy")
"""


def start_proxy(url: str, *, cached: bool):
    socket_dir = tempfile.mkdtemp(prefix="bv-bench-egress-")
    env = {**os.environ, "DATABASE_URL": url, "BELVEDIR_EGRESS_SOCKET_DIR": socket_dir, "BELVEDIR_EGRESS_ALLOW_NETWORKS": f"{OUTSIDE}/32"}
    command = [sys.executable, "-c", CACHED] if cached else [sys.executable, "manage.py", "egress_proxy"]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    while (line := process.stdout.readline()) and "Egress proxy listening" not in line:
        pass
    assert process.poll() is None, "the egress proxy did not start"
    threading.Thread(target=lambda: [None for _ in process.stdout], daemon=True).start()
    return process, socket_dir


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=500)
    args = parser.parse_args()
    with throwaway_database("belvedir_bench_egress") as url:
        from belvedir.sandbox.egress import SOCKET_NAME, issue_grant
        from belvedir.sandbox.owners import Owner

        server = ThreadingHTTPServer((OUTSIDE, 0), Hello)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        port = server.server_address[1]
        _, token = issue_grant(Owner("bench", "1"))
        proxies = {name: start_proxy(url, cached=name == "cached") for name in ("proxied", "cached")}
        try:
            auth = "Proxy-Authorization: Basic " + base64.b64encode(f"bench-1:{token}".encode()).decode() + "\r\n"
            url_path = f"http://{OUTSIDE}:{port}/hello"

            def through(socket_dir):
                def connect():
                    conn = socket.socket(socket.AF_UNIX)
                    conn.connect(f"{socket_dir}/{SOCKET_NAME}")
                    return conn

                return lambda: get(connect, url_path, auth)

            calls = {"direct": lambda: get(lambda: socket.create_connection((OUTSIDE, port)), "/hello")}
            calls |= {name: through(socket_dir) for name, (_, socket_dir) in proxies.items()}
            for call in calls.values():
                timed(call, 20)  # warm up (a proxy's first lookup opens its database connection)
            figures = {name: [] for name in calls}
            rounds = 10
            for _ in range(rounds):
                for name, call in calls.items():
                    figures[name] += timed(call, args.requests // rounds)
        finally:
            for process, _ in proxies.values():
                process.terminate()
                process.wait(15)
            server.shutdown()
        print(f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, {args.requests} requests each")
        for name, values in figures.items():
            print(f"{name:8} median {statistics.median(values) * 1000:7.2f} ms   p95 {p95(values) * 1000:7.2f} ms")
        ratio = statistics.median(figures["proxied"]) / statistics.median(figures["cached"])
        print(f"proxied / cached (the per-connection grant read): {ratio:.2f} x")


if __name__ == "__main__":
    main()
