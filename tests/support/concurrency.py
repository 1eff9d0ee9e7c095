"""Run work in real OS threads that start together: the concurrency tests' one helper."""

import threading
from collections.abc import Callable
from typing import Any

from django.db import connection


def run_in_threads(count: int, work: Callable[[int], Any]) -> list[Any]:
    """Run ``work(i)`` in ``count`` OS threads started together; re-raise the first failure.

    Each thread closes its own database connection when it is done, so the test database
    can be flushed and dropped afterwards.
    """
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            results[i] = work(i)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    workers = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert not any(worker.is_alive() for worker in workers), "a worker thread hung"
    if errors:
        raise errors[0]
    return results
