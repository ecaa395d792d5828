from .segmentation import process_quiet_sessions


def process_sessions() -> int:
    """Scheduled: segment quiet sessions (bounded batch per call)."""
    return process_quiet_sessions()
