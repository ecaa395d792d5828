import logging
import os
import signal
import threading

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import DatabaseError, close_old_connections

from traces.backlog import Meter
from traces.batches import drain, wait_for_batches

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = (
        "Store the spans of accepted trace batches as they arrive, until stopped (SIGTERM or Ctrl-C). "
        "Run one or more beside the web server: ingest answers before spans are stored, and this is "
        "what stores them (django-q2's once-a-minute schedule is only the fallback)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--every",
            type=float,
            default=settings.TRACE_BATCH_POLL_SECONDS,
            help="Seconds between looks when idle (a batch accepted on PostgreSQL wakes it at once).",
        )
        parser.add_argument("--nice", type=int, default=5, help="Scheduling niceness added to this process (0 for none).")

    def handle(self, *args, every, nice, **options):
        # On a machine shared with the web server, requests (ingest answers,
        # dashboard pages) come first; storing catches up in the gaps, and
        # ingest pushes back if it falls too far behind (TRACE_INGEST_MAX_LAG_SECONDS).
        if nice:
            os.nice(nice)
        stop, idle = threading.Event(), threading.Event()

        def on_signal(*_):
            stop.set()
            if idle.is_set():
                raise _Stopped  # out of the wait for a batch now, not at its timeout

        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, on_signal)
        # This processor's storing rate, for ingest's push-back (traces/backlog.py).
        meter = Meter()
        self.stdout.write(f"Storing trace batches as {meter.name}, looking every {every:g} s when idle.", ending="\n")
        self.stdout.flush()
        try:
            self.loop(stop, idle, every, meter)
        finally:
            try:
                meter.retire()
            except DatabaseError:
                pass  # the database is gone: the row goes stale on its own

    def loop(self, stop, idle, every, meter):
        while not stop.is_set():
            close_old_connections()
            try:
                if drain(stop=stop, meter=meter):
                    continue
                meter.publish()  # idle, and alive
                idle.set()
                try:
                    if not stop.is_set():
                        wait_for_batches(every)
                finally:
                    idle.clear()
            except _Stopped:
                break
            except DatabaseError as exc:
                # The database is down or restarting: the batches wait, unharmed.
                logger.warning("Trace batch pass failed, retrying in %g s: %s", every, exc)
                close_old_connections()
                stop.wait(every)


class _Stopped(Exception):
    pass
