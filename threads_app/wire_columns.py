"""A transcript read's columns as the wire shows them, written by the database.

A read of thousands of steps spends its time per row and per value. Two kinds of value cost
the most to turn into what the wire shows:

- times: psycopg's loader for ``timestamptz`` (the one Django installs, to give each value
  the connection's time zone) is pure Python, about 7 microseconds a value, three values a
  step, and then ``wire.iso`` formats each datetime back into text. On PostgreSQL a read
  selects ``IsoTime(column)``: the text ``wire.iso`` would give
  (``YYYY-MM-DDTHH:MM:SS[.ffffff]Z``, no fraction when it is zero, as
  ``datetime.isoformat`` writes it), which psycopg hands over as a string;
- ids: a ``uuid.UUID`` made for each id, and printed again. On PostgreSQL a read selects
  ``UuidText(column)``, the id's text.

Other databases select the column unchanged, converted as the model field's value (SQLite
keeps a UUID as 32 hex digits, which is not the wire's text), and ``wire`` formats it.
"""

from typing import Any

from django.db.models import DateTimeField, F, Func, UUIDField


class _OnPostgreSQL(Func):
    """``column`` through ``POSTGRESQL_TEMPLATE`` on PostgreSQL (text, no converter), the
    column itself elsewhere (the field's converters)."""

    POSTGRESQL_TEMPLATE = "%(expressions)s"

    def __init__(self, column: str) -> None:
        super().__init__(F(column))

    # The template is this expression's own: the compiler never passes one.
    def as_sql(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:  # type: ignore[override]
        return Func.as_sql(self, compiler, connection, template="%(expressions)s", **extra_context)

    def as_postgresql(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:
        return Func.as_sql(self, compiler, connection, template=self.POSTGRESQL_TEMPLATE, **extra_context)

    def get_db_converters(self, connection: Any) -> list[Any]:
        return [] if connection.vendor == "postgresql" else super().get_db_converters(connection)


class IsoTime(_OnPostgreSQL):
    """A ``timestamptz`` as ISO-8601 text in UTC ending in ``Z`` (PostgreSQL), else the datetime."""

    output_field = DateTimeField()
    POSTGRESQL_TEMPLATE = (
        "replace(to_char(%(expressions)s AT TIME ZONE 'UTC', "
        "'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), '.000000Z', 'Z')"
    )


class UuidText(_OnPostgreSQL):
    """A ``uuid`` as its text (PostgreSQL), else the ``uuid.UUID``."""

    output_field = UUIDField()
    POSTGRESQL_TEMPLATE = "(%(expressions)s)::text"
