import logging
import signal
import threading

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import DatabaseError, close_old_connections

from traces.segmentation import drain_quiet_sessions

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = (
        "Segment quiet trace sessions every few seconds, until stopped (SIGTERM or Ctrl-C). "
        "Run it beside the worker: django-q2's scheduler wakes only every 30 s, so its "
        "once-a-minute schedule is the fallback, not the cadence."
    )

    def add_arguments(self, parser):
        parser.add_argument("--every", type=float, default=settings.TRACE_SEGMENT_EVERY_SECONDS, help="Seconds between passes.")

    def handle(self, *args, every, **options):
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        self.stdout.write(f"Segmenting sessions quiet for {settings.TRACE_QUIET_SECONDS} s, every {every:g} s.")
        while not stop.is_set():
            close_old_connections()
            try:
                drain_quiet_sessions(stop=stop)
            except DatabaseError as exc:
                # The database is down or restarting: try again next pass.
                logger.warning("Segmentation pass failed, retrying in %g s: %s", every, exc)
                close_old_connections()
            stop.wait(every)
