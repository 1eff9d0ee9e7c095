"""Statements PostgreSQL parses and plans once per connection, for the SQL every turn sends.

Django's PostgreSQL cursors bind parameters on the client (``ClientCursor``): the values are
quoted into the text, so every execution is a new statement the server parses, analyses and
plans again. For the few statements written once as SQL that every turn sends (the turn's
claim and release, the send's INSERT, a step's append, the outcome), that work was about a
third of PostgreSQL's CPU per turn (issue 22, measured with ``log_*_stats``). A cursor from
``cursor()`` binds on the server and prepares each statement on its connection the first
time it runs there: later executions send only the parameters. The statements keep going
through Django's cursor wrapper (its error translation, its query log, the count tests).

Only these cursors prepare: the ORM's stay client-bound, so pooled connections and Django's
own queries behave as before. Other databases get Django's ordinary cursor.
"""

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import psycopg
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.utils import CursorWrapper


class _PreparingCursor(psycopg.Cursor[Any]):
    """A server-binding cursor that prepares every statement it executes."""

    def execute(
        self,
        query: Any,
        params: Sequence[Any] | Mapping[str, Any] | None = None,
        *,
        prepare: bool | None = None,
        binary: bool | None = None,
    ) -> "_PreparingCursor":
        super().execute(query, params, prepare=True, binary=binary)
        return self


class _Made:
    """What preparing cursors are made of: ``_PreparingCursor``, or the class ``make_cursors_of``
    derived from it (traces: ``chatproject.tracing`` installs the psycopg instrumentation's
    traced subclass, since these cursors bypass the connection's cursor factory)."""

    cursor_class: type[psycopg.Cursor[Any]] = _PreparingCursor


def make_cursors_of(derive: Callable[[type[psycopg.Cursor[Any]]], type[psycopg.Cursor[Any]]] | None) -> None:
    """Make preparing cursors of ``derive(_PreparingCursor)`` from now on (None: of it again)."""
    _Made.cursor_class = derive(_PreparingCursor) if derive is not None else _PreparingCursor


def cursor() -> CursorWrapper:
    """A cursor of the default connection (``with cursor() as c:``) whose statements are
    prepared on PostgreSQL; Django's ordinary cursor elsewhere."""
    db = connections[DEFAULT_DB_ALIAS]  # once: each attribute of the proxy looks it up again
    if db.vendor != "postgresql":
        return db.cursor()
    db.ensure_connection()  # what Django's cursor() does before it wraps its own
    db.validate_thread_sharing()
    raw: Any = _Made.cursor_class(db.connection)  # a DB-API cursor (the stubs say a wrapper)
    return db.make_debug_cursor(raw) if db.queries_logged else db.make_cursor(raw)
