import threading

from django.db import connection


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
