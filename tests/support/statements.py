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
        self._lock = threading.Lock()

    def add(self, sql: str) -> None:
        with self._lock:
            self.sql.append(sql)

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
