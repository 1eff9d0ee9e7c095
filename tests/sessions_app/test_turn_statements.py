"""The turn claim's SQL (``sessions_app.turn_statements``) keeps the lease rule of
``processes.claimable``: exactly one live holder; a dead holder's claim is free."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from sessions_app import turn_statements
from sessions_app.models import ServerProcess, SocketSession

pytestmark = pytest.mark.django_db


@pytest.fixture
def session(make_user) -> SocketSession:
    return SocketSession.objects.create(id=uuid.uuid4(), user=make_user(), thread_id=uuid.uuid4())


def process(name: str, *, beat_ago: float) -> str:
    """A process row whose heartbeat is ``beat_ago`` seconds old; its mailbox address."""
    address = f"{name}-{uuid.uuid4().hex}"
    ServerProcess.objects.create(
        address=address, pid=1, heartbeat_at=timezone.now() - timedelta(seconds=beat_ago)
    )
    return address


def holder(session: SocketSession) -> str:
    return SocketSession.objects.values_list("turn_owner", flat=True).get(pk=session.pk)


def test_a_free_turn_is_claimed_once(session):
    a, b = process("a", beat_ago=0), process("b", beat_ago=0)
    assert turn_statements.claim(session.pk, a)
    assert not turn_statements.claim(session.pk, b), "a live holder's claim was taken"
    assert not turn_statements.claim(session.pk, a), "the turn claim is not reentrant"
    assert holder(session) == a
    assert SocketSession.objects.get(pk=session.pk).turn_heartbeat is not None


def test_a_dead_holders_claim_is_taken_over(session, settings):
    dead = process("dead", beat_ago=settings.PROCESS_DEAD_AFTER + 5)
    live = process("live", beat_ago=0)
    assert turn_statements.claim(session.pk, dead)  # a free turn: anyone may take it
    assert turn_statements.claim(session.pk, live)
    assert holder(session) == live


def test_only_the_holder_releases(session):
    a, b = process("a", beat_ago=0), process("b", beat_ago=0)
    assert turn_statements.claim(session.pk, a)
    turn_statements.release(session.pk, b)
    assert holder(session) == a
    turn_statements.release(session.pk, a)
    assert holder(session) == ""
    assert SocketSession.objects.get(pk=session.pk).turn_heartbeat is None
    assert turn_statements.claim(session.pk, b)


def test_another_sessions_turn_is_untouched(session, make_user):
    other = SocketSession.objects.create(id=uuid.uuid4(), user=make_user(), thread_id=uuid.uuid4())
    assert turn_statements.claim(session.pk, process("a", beat_ago=0))
    assert holder(other) == ""


def test_the_release_records_the_outcome_of_the_turns_send(session):
    """The outcome rides on the release (one statement on PostgreSQL): both rows written; a
    send that has an outcome already keeps it."""
    from threads_app.models import AcceptedMessage, Thread
    from threads_app.services import accept_message, default_box_for

    user = session.user
    thread = Thread.objects.create(owner=user, box=default_box_for(user), name="t")
    sends = [
        accept_message(message_id=uuid.uuid4(), thread=thread, author=user, text=t, holder="me")[0]
        for t in ("one", "two")
    ]
    a = process("a", beat_ago=0)
    assert turn_statements.claim(session.pk, a)
    turn_statements.release(session.pk, a, (sends[0].pk, AcceptedMessage.Outcome.REPLIED))
    assert holder(session) == ""
    assert turn_statements.claim(session.pk, a)
    turn_statements.release(session.pk, a, (sends[0].pk, AcceptedMessage.Outcome.ERROR))
    rows = dict(AcceptedMessage.objects.values_list("text", "outcome"))
    holders = dict(AcceptedMessage.objects.values_list("text", "holder"))
    assert rows == {"one": "replied", "two": ""}, rows
    assert holders == {"one": "", "two": "me"}, holders
    assert holder(session) == ""


def test_a_send_is_accepted_and_its_turn_claimed_in_one_go(session):
    """``accept_claiming``: the row, and the claim only when the row was made; the row is
    kept when another live process holds the turn."""
    from threads_app.models import AcceptedMessage, Thread
    from threads_app.services import default_box_for

    user = session.user
    thread = Thread.objects.create(owner=user, box=default_box_for(user), name="t")
    a, b = process("a", beat_ago=0), process("b", beat_ago=0)

    def send(text: str, client_id: uuid.UUID, owner: str) -> tuple[AcceptedMessage | None, int]:
        return turn_statements.accept_claiming(
            owner,
            id=AcceptedMessage.key(thread.pk, client_id),
            client_id=client_id,
            thread=thread,
            box_id=thread.box_id,
            author=user,
            text=text,
            source=AcceptedMessage.Source.HOOK,
            session_id=session.pk,
            holder=owner,
        )

    first = uuid.uuid4()
    record, claimed = send("one", first, a)
    assert record is not None and claimed and holder(session) == a
    turn_statements.release(session.pk, a)
    assert send("one", first, b) == (None, False), "a repeat made a row or claimed the turn"
    assert holder(session) == ""
    assert turn_statements.claim(session.pk, a)
    record, claimed = send("two", uuid.uuid4(), b)
    assert record is not None and not claimed and holder(session) == a
    stored = sorted(AcceptedMessage.objects.values_list("text", "holder", "session_id"))
    assert stored == [("one", a, session.pk), ("two", b, session.pk)], stored
