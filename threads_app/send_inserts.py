"""A send's acceptance record written by SQL written once, not by the ORM per send.

Every send makes one ``AcceptedMessage`` row. ``Model.objects.create`` built and compiled its
INSERT anew each time, about a fifth of the CPU a hooks-API turn spent in the server (issue
22). Here the INSERT is written once for the connection's database, its values adapted by
the model's own fields, and prepared on PostgreSQL (``threads_app.prepared``). A key already
taken inserts nothing (``ON CONFLICT DO NOTHING``: no failed statement, so no savepoint is
needed inside a transaction); the caller then reads the row that holds it.
"""

import functools
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.utils import timezone

from threads_app import prepared
from threads_app.column_values import Columns
from threads_app.models import AcceptedMessage

# ``_meta`` is Django's documented Model _meta API, not a private member.
_COLUMNS = Columns(AcceptedMessage._meta.concrete_fields)  # noqa: SLF001


@functools.cache
def _sql(vendor: str) -> str:
    """The INSERT for ``vendor`` (its quoting)."""
    q = connection.ops.quote_name
    table = q(AcceptedMessage._meta.db_table)  # noqa: SLF001
    columns = ", ".join(q(str(f.column)) for f in _COLUMNS)
    values = ", ".join("%s" for _ in _COLUMNS)
    return f"INSERT INTO {table} ({columns}) VALUES ({values}) ON CONFLICT ({q('id')}) DO NOTHING"


def insert_statement(**values: Any) -> tuple[AcceptedMessage, str, list[Any]]:
    """The row of ``values`` (field names as ``AcceptedMessage(...)`` takes them; the others
    get their defaults), and the INSERT that writes it with its parameters: for a caller that
    sends it inside a statement of its own (``sessions_app.turn_statements.accept_claiming``)."""
    record = AcceptedMessage(accepted_at=timezone.now(), **values)
    params = _COLUMNS.db_values([getattr(record, f.attname) for f in _COLUMNS], connections[DEFAULT_DB_ALIAS])
    return record, _sql(connection.vendor), params


def inserted(record: AcceptedMessage) -> AcceptedMessage:
    """``record``, marked as a row the database holds."""
    record._state.adding = False  # noqa: SLF001 (Django's documented instance state)
    record._state.db = connection.alias  # noqa: SLF001
    return record


def insert_send(**values: Any) -> AcceptedMessage | None:
    """Insert the row of ``values`` (as ``insert_statement`` takes them) and return it, or
    None when its key is taken already."""
    record, sql, params = insert_statement(**values)
    with prepared.cursor() as cursor:
        cursor.execute(sql, params)
        if cursor.rowcount != 1:
            return None
    return inserted(record)
