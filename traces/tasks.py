from .batches import drain
from .partitions import apply_retention
from .segmentation import drain_quiet_sessions


def process_sessions() -> int:
    """Scheduled every minute: segment every quiet session.

    The fallback cadence: `manage.py segment_sessions` does the same every
    few seconds, and the two skip each other's sessions.
    """
    return drain_quiet_sessions()


def process_trace_batches() -> int:
    """Scheduled every minute: store every waiting ingest batch.

    The fallback: `manage.py process_trace_batches` polls continuously, and
    the two skip each other's batches (FOR UPDATE SKIP LOCKED).
    """
    return drain()


def maintain_trace_partitions() -> list[str]:
    """Scheduled hourly: drop span months past TRACE_RETENTION_MONTHS, create this month's and next month's."""
    return apply_retention()
