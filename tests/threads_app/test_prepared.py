"""The cursors of the statements every turn sends prepare them on PostgreSQL, once per
connection, and are Django's ordinary cursors elsewhere (``threads_app.prepared``)."""

import uuid

import pytest
from django.db import connection

from threads_app import prepared
from threads_app.services import settle_sends

pytestmark = pytest.mark.django_db


def prepared_statements() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL prepares; SQLite has no such thing")
def test_a_statement_is_prepared_once_and_reused():
    for value in (1, 2, 3):
        with prepared.cursor() as cursor:
            cursor.execute("SELECT %s::int + 1", [value])
            assert cursor.fetchone() == (value + 1,)
    statements = prepared_statements()
    assert statements.count("SELECT $1::int + 1") == 1, statements


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL prepares; SQLite has no such thing")
def test_the_outcome_update_every_turn_ends_with_is_prepared():
    settle_sends([uuid.uuid4()], "replied")
    statements = prepared_statements()
    assert any(s.startswith('UPDATE "threads_app_acceptedmessage" SET "outcome" = $1') for s in statements), (
        statements
    )


def test_the_orm_keeps_binding_on_the_client():
    """Only these cursors prepare: a query of the ORM is sent with its values in its text."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s", ["client-bound"])
        assert cursor.fetchone() == ("client-bound",)
    if connection.vendor == "postgresql":
        assert not any("client-bound" in s or s == "SELECT $1" for s in prepared_statements())
