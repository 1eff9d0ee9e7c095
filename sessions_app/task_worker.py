"""The task workers of a server process: threads that run the database queue's tasks.

Durable background work (webhook attempts, ``sessions_app.webhook_tasks``) is enqueued as
``django-tasks`` tasks in the database (``django_tasks_db``). Every server process runs
``TASK_WORKER_THREADS`` workers of that backend (its own ``Worker`` loop, as its ``db_worker``
command runs, without the command's signal handling: the server's shutdown stops them), so no
separate worker process needs deploying; they take tasks with ``SELECT ... FOR UPDATE SKIP
LOCKED`` on PostgreSQL, so each task runs once across processes. The worker id is the
process's mailbox address, by which the recovery loop tells an attempt whose process died.
The workers take only this deployment's queues (``webhook_tasks.queue``: named by the channel
layer), never another deployment's that shares the database.
"""

import logging
import threading

from django.conf import settings
from django.db import connection
from django_tasks_db.management.commands.db_worker import Worker

from sessions_app import webhook_tasks

logger = logging.getLogger(__name__)


def worker_id(address: str) -> str:
    """A process's id as a task worker (the backend keeps 64 characters)."""
    return address[:64]


class TaskWorkers:
    """This process's worker threads; started once the process has its address."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._workers: list[tuple[Worker, threading.Thread]] = []

    def start(self, address: str) -> None:
        """Start the worker threads (idempotent; none when ``TASK_WORKER_THREADS`` is 0)."""
        with self._lock:
            if self._workers:
                return
            for n in range(settings.TASK_WORKER_THREADS):
                worker = Worker(
                    queue_names=[webhook_tasks.queue()],
                    interval=settings.TASK_WORKER_INTERVAL,
                    batch=False,
                    backend_name="default",
                    startup_delay=False,
                    max_tasks=None,
                    worker_id=worker_id(address),
                    excluded_queue_names=[],
                )
                thread = threading.Thread(
                    target=self._run, args=(worker,), name=f"tether-tasks-{n}", daemon=True
                )
                self._workers.append((worker, thread))
                thread.start()

    @staticmethod
    def _run(worker: Worker) -> None:
        try:
            worker.run()
        except Exception:
            logger.exception("task worker stopped")
        finally:
            connection.close()

    def stop(self, timeout: float = 5) -> None:
        """Let each worker finish the task it runs, then stop (a shutdown)."""
        with self._lock:
            workers, self._workers = self._workers, []
        for worker, _thread in workers:
            worker.running = False
        for _worker, thread in workers:
            thread.join(timeout)


task_workers = TaskWorkers()
