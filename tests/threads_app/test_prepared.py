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


def turn_statements_in_a_loop(user, turns: int) -> None:
    """The statements of ``turns`` turns on this connection: a hooks-API turn's (the send
    accepted with its claim, the user step, the reply, the release with the outcome) and an
    engine turn's last write (the reply with the outcome), under the turn's claim as in a
    server."""
    from sessions_app import turn_statements
    from sessions_app.models import SocketSession
    from sessions_app.turns import turn_fence
    from threads_app.fencing import Fence
    from threads_app.models import AcceptedMessage
    from threads_app.services import ensure_thread, transcribe_user_turn, upsert_step, write_answering_step

    thread, _ = ensure_thread(user, uuid.uuid4(), name="plans")
    session = SocketSession.objects.create(id=uuid.uuid4(), user=user, thread_id=thread.pk)
    owner = "test-process"
    # Plans depend on the table's size: an almost empty table makes every plan look alike.
    AcceptedMessage.objects.bulk_create(
        AcceptedMessage(
            id=uuid.uuid4(), client_id=uuid.uuid4(), thread=thread, box_id=thread.box_id, author=user
        )
        for _ in range(3000)
    )
    for i in range(turns):
        message_id = uuid.uuid4()
        send, epoch = turn_statements.accept_claiming(
            owner,
            id=AcceptedMessage.key(thread.pk, message_id),
            client_id=message_id,
            thread=thread,
            box_id=thread.box_id,
            author=user,
            text=f"message {i}",
            images=[],
            source=AcceptedMessage.Source.HOOK,
            session_id=session.id,
            holder=owner,
            queued=False,
        )
        assert send is not None and epoch, f"turn {i}: the send or its claim was not made"
        fence = turn_fence(session.id, owner, epoch)
        transcribe_user_turn(
            thread.pk,
            send.pk,
            author=user.username,
            text=send.text,
            content=[],
            accepted_ids=[send.pk],
            message_ids=[message_id],
            unqueued_ids=[send.pk],
            fence=fence.with_also(Fence(AcceptedMessage, send.pk, "holder", None, owner, None)),
        )
        upsert_step(
            thread.pk, uuid.uuid4(), type="assistant_message", name="assistant", output="hi", fence=fence
        )
        assert turn_statements.release(session.id, owner, (send.pk, "replied"), epoch=epoch)
        write_answering_step(
            thread.pk, uuid.uuid4(), answers=[send.pk], outcome="replied", type="assistant_message", name="a"
        )


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL prepares; SQLite has no such thing")
def test_every_statement_a_turn_prepares_settles_on_one_generic_plan(user):
    """PostgreSQL plans the first five executions of a prepared statement for their values,
    then keeps one generic plan, unless that plan looks dearer than the custom ones: then it
    plans every execution anew, as if the statement were not prepared. The user step named its
    sends by an array (``id = ANY(%s)``), whose generic plan guesses ten rows, and was planned
    443 times in 433 executions (issue 22, ``pg_stat_statements``): about 0.35 ms of
    PostgreSQL per turn. Every statement a turn sends must take its generic plan after five
    executions (``pg_prepared_statements`` counts both kinds of plans per connection)."""
    turns = 9
    turn_statements_in_a_loop(user, turns)
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements")
        plans = cursor.fetchall()
    ours = [p for p in plans if "threads_app_" in p[0] or "sessions_app_" in p[0]]
    # accept + claim, the user step, the reply, the release with the outcome, the engine's reply.
    assert len(ours) == 5, "\n".join(p[0] for p in ours)
    replanned = [(custom, generic, " ".join(statement.split())[:200]) for statement, generic, custom in ours]
    assert all(custom <= 5 and generic == turns - custom for custom, generic, _ in replanned), "\n".join(
        f"custom {custom}, generic {generic}: {statement}" for custom, generic, statement in replanned
    )
