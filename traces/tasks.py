from .segmentation import drain_quiet_sessions


def process_sessions() -> int:
    """Scheduled every minute: segment every quiet session.

    The fallback cadence: `manage.py segment_sessions` does the same every
    few seconds, and the two skip each other's sessions.
    """
    return drain_quiet_sessions()
