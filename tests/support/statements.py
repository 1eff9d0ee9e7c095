"""Counting the SQL statements a piece of work sends, on every connection and thread.

Django's ``CaptureQueriesContext`` sees one connection of one thread; the server's database
work runs on ``database_sync_to_async``'s thread (and the heartbeat's). This counts at the
cursor, process-wide, and keeps each statement's SQL so a failing test can show them.
"""

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from django.db.backends import utils

# Every cursor's execute and executemany pass through this one method (Django 5.2).
CURSOR_METHOD = "_execute_with_wrappers"


class Statements:
    def __init__(self) -> None:
        self.sql: list[str] = []
        self.threads: list[str] = []  # the name of the thread that sent each statement
        self._lock = threading.Lock()

    def add(self, sql: str) -> None:
        with self._lock:
            self.sql.append(sql)
            self.threads.append(threading.current_thread().name)

    def not_from_thread(self, name: str) -> list[str]:
        """The statements no thread called ``name`` sent (a periodic job's own thread, say)."""
        return [s for s, t in zip(self.sql, self.threads, strict=True) if t != name]

    def excluding(self, *needles: str) -> list[str]:
        """The statements that mention none of ``needles`` (another thread's periodic work, say)."""
        return [s for s in self.sql if not any(n in s for n in needles)]

    def matching(self, *needles: str) -> list[str]:
        """The statements that mention any of ``needles`` (table names, say)."""
        return [s for s in self.sql if any(n in s for n in needles)]

    def __len__(self) -> int:
        return len(self.sql)


@contextlib.contextmanager
def counting_statements() -> Iterator[Statements]:
    """Count every statement executed through Django's cursors while the block runs."""
    seen = Statements()
    original = getattr(utils.CursorWrapper, CURSOR_METHOD)

    def counted(self: Any, sql: str, params: Any, many: bool, executor: Any) -> Any:
        seen.add(sql)
        return original(self, sql, params, many, executor)

    setattr(utils.CursorWrapper, CURSOR_METHOD, counted)
    try:
        yield seen
    finally:
        setattr(utils.CursorWrapper, CURSOR_METHOD, original)


class NamedCalls:
    """Calls recorded by the name of what each one ran, from any thread."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self._lock = threading.Lock()

    def add(self, name: str) -> None:
        with self._lock:
            self.names.append(name)

    def __len__(self) -> int:
        return len(self.names)


class Trips(NamedCalls):
    """The database calls (``sessions_app.database.database_sync_to_async``) made while a
    block runs, by the name of the function each one ran: one thread hop and one connection
    checkout each, whatever statements they send."""


@contextlib.contextmanager
def counting_trips() -> Iterator[Trips]:
    """Count every call through the server's one way to its database while the block runs."""
    from sessions_app.database import database_sync_to_async

    seen = Trips()
    original = database_sync_to_async.__call__

    async def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        seen.add(getattr(self.func, "__qualname__", repr(self.func)))
        return await original(self, *args, **kwargs)

    database_sync_to_async.__call__ = counted  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        database_sync_to_async.__call__ = original  # type: ignore[method-assign]


class Hold:
    """Statements held at the cursor until ``release()``: ``held`` is set when the first one
    is, so the code that waits for it knows that statement's call is in flight."""

    def __init__(self, needle: str, timeout: float) -> None:
        self.needle = needle
        self.timeout = timeout
        self.held = threading.Event()
        self._released = threading.Event()

    def matches(self, sql: str, params: Any) -> bool:
        return self.needle in sql or self.needle in repr(params)

    def wait_for_release(self) -> None:
        self.held.set()
        # Never for ever: a test that forgets to release fails on what it asserts, not by hanging.
        self._released.wait(self.timeout)

    def release(self) -> None:
        self._released.set()


@contextlib.contextmanager
def holding_statements(needle: str, *, timeout: float = 10.0) -> Iterator[Hold]:
    """Hold every statement whose SQL or parameters mention ``needle``, on any connection
    and thread, before it is sent, until the hold is released (or ``timeout`` passes): a
    database call provably in flight. Leaving the block releases the hold."""
    hold = Hold(needle, timeout)
    original = getattr(utils.CursorWrapper, CURSOR_METHOD)

    def held(self: Any, sql: str, params: Any, many: bool, executor: Any) -> Any:
        if hold.matches(sql, params):
            hold.wait_for_release()
        return original(self, sql, params, many, executor)

    setattr(utils.CursorWrapper, CURSOR_METHOD, held)
    try:
        yield hold
    finally:
        hold.release()
        setattr(utils.CursorWrapper, CURSOR_METHOD, original)
