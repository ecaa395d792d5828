"""gunicorn settings for serving Belvedir in production.

gunicorn reads this file from the directory it starts in, so from the
repository root `gunicorn belvedir.wsgi` is the whole command. BIND and
WEB_CONCURRENCY override the address and the number of workers.
"""

import gc
import multiprocessing
import os

bind = os.environ.get("BIND", "127.0.0.1:8000")
workers = int(os.environ.get("WEB_CONCURRENCY") or 2 * multiprocessing.cpu_count() + 1)
# Trace exporters send up to 5 MB per request; give slow links time.
timeout = 60
# Django is imported once, in the master, and workers fork from it warm:
# otherwise each worker's first request pays for importing every view
# (measured: ~400 ms on top of a 1,000-span ingest request).
preload_app = True


def when_ready(server):
    from django.db import connections
    from django.urls import get_resolver

    # The URLconf (and through it every view, serializer and form) is
    # imported lazily on the first request; do it here, before the fork.
    get_resolver().url_patterns  # noqa: B018  (the import is the point)
    # The MCP server, which its view imports on its first call (workspace/mcp/view.py).
    import workspace.mcp.server  # noqa: F401

    # Nothing above should have connected, but a connection opened in the
    # master must never be shared by the forked workers.
    connections.close_all()
    # Keep the long-lived objects imported so far out of every later
    # garbage collection, and share their memory pages with the workers.
    gc.freeze()
