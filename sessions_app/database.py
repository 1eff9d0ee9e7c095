"""Where the server's database calls run: a bounded pool of threads, so that one session's
slow write never holds up another session's message.

Channels' ``database_sync_to_async`` is thread-sensitive: every call of a process runs on one
thread, one after the other, and under load every session's turn queues behind every other
session's statements. This wrapper runs the calls on ``DATABASE_THREADS`` threads instead,
each with its own connection from the process's psycopg pool (``DB_POOL_SIZE``).

Each of those threads keeps its connection from one call to the next (``_KeepingConnection``).
Channels closes a thread's connection after every call, which with the pool means a check-in,
a check-out and Django's connection setup around each: about 0.13 ms of CPU per call here,
the cost of the query itself (issue 22). A connection is still dropped after a call that left
it broken or outside autocommit (Django's rules for old connections), and
``release_connections`` hands them all back (before the test database is dropped, say).

What keeps the guarantees: a coroutine awaits its database call before it goes on, so one
session's (and one thread's) calls still run in the order it makes them; exactly-once claims
are conditional UPDATEs and unique keys in the database, which do not depend on which thread
sends them. Calls stay on the one thread-sensitive thread when the database is SQLite (one
writer at a time anyway) and when the caller is synchronous code that went through
``async_to_sync`` (its thread, and its open transaction, must see the call).
"""

import functools
import threading
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, Generic, ParamSpec, TypeVar

from asgiref.sync import AsyncToSync, SyncToAsync
from channels.db import DatabaseSyncToAsync
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper

from sessions_app.metrics import count_database_trip
from sessions_app.thread_pools import LazyThreadPool

P = ParamSpec("P")
R = TypeVar("R")


# The process's database threads.
executor = LazyThreadPool("DATABASE_THREADS", "database")


@functools.cache
def _concurrent_database() -> bool:
    return bool(settings.DATABASE_THREADS > 1) and "sqlite" not in settings.DATABASES["default"]["ENGINE"]


class _KeptConnections:
    """The database threads' connections, kept open between calls."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: weakref.WeakSet[BaseDatabaseWrapper] = weakref.WeakSet()

    def keep_or_drop(self) -> None:
        """After a call: keep this thread's connection for the next one, unless the call left
        it outside autocommit or broken (the rules of Django's ``close_if_unusable_or_obsolete``,
        without its age limit: ``close_at``)."""
        db = connections[DEFAULT_DB_ALIAS]
        if db.connection is None:
            return
        if db.in_atomic_block or not db.autocommit or (db.errors_occurred and not db.is_usable()):
            db.close()
            return
        db.errors_occurred = False
        if db.close_at is not None:
            db.close_at = None
            with self._lock:
                self._kept.add(db)

    def release(self) -> int:
        """Hand every kept connection back to the pool; how many. Only while no database call
        runs (a connection is closed from another thread than its own)."""
        released = 0
        while True:
            with self._lock:
                if not self._kept:
                    return released
                db = self._kept.pop()
            db.inc_thread_sharing()
            try:
                db.close()
            finally:
                db.dec_thread_sharing()
            released += 1


kept_connections = _KeptConnections()
release_connections = kept_connections.release


class _KeepingConnection(DatabaseSyncToAsync):  # type: ignore[type-arg]  # generic in the stubs only
    """``DatabaseSyncToAsync`` whose thread keeps its connection between calls."""

    def thread_handler(self, loop: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return SyncToAsync.thread_handler(self, loop, *args, **kwargs)  # type: ignore[no-untyped-call]
        finally:
            kept_connections.keep_or_drop()


class database_sync_to_async(Generic[P, R]):
    """Run ``func`` (synchronous ORM code) from async code, on a database thread."""

    def __init__(self, func: Callable[P, R]) -> None:
        self.func = func
        self._serial = DatabaseSyncToAsync(func)
        self._pooled: Callable[P, Awaitable[R]] | None = None
        functools.update_wrapper(self, func)

    async def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        count_database_trip()  # of the turn this call belongs to, if any (sessions_app.metrics)
        if not _concurrent_database() or getattr(AsyncToSync.executors, "current", None) is not None:
            return await self._serial(*args, **kwargs)
        if self._pooled is None:
            self._pooled = _KeepingConnection(self.func, thread_sensitive=False, executor=executor.get())
        return await self._pooled(*args, **kwargs)
