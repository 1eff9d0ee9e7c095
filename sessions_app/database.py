"""Where the server's database calls run: a bounded pool of threads, so that one session's
slow write never holds up another session's message.

Channels' ``database_sync_to_async`` is thread-sensitive: every call of a process runs on one
thread, one after the other, and under load every session's turn queues behind every other
session's statements. This wrapper runs the calls on ``DATABASE_THREADS`` threads instead,
each with its own connection from the process's psycopg pool (``DB_POOL_SIZE``), and closes
obsolete connections around each call the way Channels does.

What keeps the guarantees: a coroutine awaits its database call before it goes on, so one
session's (and one thread's) calls still run in the order it makes them; exactly-once claims
are conditional UPDATEs and unique keys in the database, which do not depend on which thread
sends them. Calls stay on the one thread-sensitive thread when the database is SQLite (one
writer at a time anyway) and when the caller is synchronous code that went through
``async_to_sync`` (its thread, and its open transaction, must see the call).
"""

import functools
from collections.abc import Callable
from typing import Generic, ParamSpec, TypeVar

from asgiref.sync import AsyncToSync
from channels.db import DatabaseSyncToAsync
from django.conf import settings

from sessions_app.metrics import count_database_trip
from sessions_app.thread_pools import LazyThreadPool

P = ParamSpec("P")
R = TypeVar("R")


# The process's database threads.
executor = LazyThreadPool("DATABASE_THREADS", "database")


@functools.cache
def _concurrent_database() -> bool:
    return bool(settings.DATABASE_THREADS > 1) and "sqlite" not in settings.DATABASES["default"]["ENGINE"]


class database_sync_to_async(Generic[P, R]):
    """Run ``func`` (synchronous ORM code) from async code, on a database thread."""

    def __init__(self, func: Callable[P, R]) -> None:
        self.func = func
        self._serial = DatabaseSyncToAsync(func)
        self._pooled: DatabaseSyncToAsync[P, R] | None = None
        functools.update_wrapper(self, func)

    async def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        count_database_trip()  # of the turn this call belongs to, if any (sessions_app.metrics)
        if not _concurrent_database() or getattr(AsyncToSync.executors, "current", None) is not None:
            return await self._serial(*args, **kwargs)
        if self._pooled is None:
            self._pooled = DatabaseSyncToAsync(self.func, thread_sensitive=False, executor=executor.get())
        return await self._pooled(*args, **kwargs)
