import threading

from django.db import connection


class DbThread(threading.Thread):
    """fn(*args) in a daemon thread with its own DB connection, closed when it
    ends (the test database could not be dropped otherwise); keeps the result."""

    def __init__(self, fn, *args):
        super().__init__(daemon=True)
        self.fn, self.args, self.result = fn, args, None

    def run(self):
        try:
            self.result = self.fn(*self.args)
        finally:
            connection.close()


def start_thread(fn, *args) -> DbThread:
    thread = DbThread(fn, *args)
    thread.start()
    return thread


def run_concurrently(fn, count: int) -> list:
    """Call fn(i) from `count` threads released at once, each with its own DB connection.

    Returns each call's result, or the exception it raised.
    """
    barrier = threading.Barrier(count)
    results: list = [None] * count

    def worker(i):
        try:
            barrier.wait()
            results[i] = fn(i)
        except Exception as exc:  # noqa: BLE001 - the caller inspects what each thread got
            results[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return results


def lock_waiters() -> int:
    """How many connections to the test database are blocked on a row or table lock (PostgreSQL)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'")
        return cursor.fetchone()[0]


def someone_waits_on_a_lock() -> bool:
    """Whether another connection to the test database is blocked on a row or table lock (PostgreSQL)."""
    return lock_waiters() > 0
