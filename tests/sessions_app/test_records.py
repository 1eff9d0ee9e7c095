"""Session records: open/restore/refuse, once-only flag claims, expiry, deferred steps, saves."""

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from sessions_app import records
from sessions_app.models import SocketSession
from sessions_app.records import SessionNotOwned
from tests.support.concurrency import run_in_threads
from threads_app.models import Thread
from threads_app.services import ensure_thread

pytestmark = pytest.mark.django_db


def fields(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "thread_id": uuid.uuid4(),
        "client_type": "webapp",
        "chat_profile": "",
        "user_env": {"lang": "en"},
    }
    base.update(overrides)
    return base


def opened(user, channel: str = "chan.one", **overrides: Any) -> SocketSession:
    return records.open_session(uuid.uuid4(), user, channel=channel, new_fields=fields(**overrides)).record


# --- open_session ---------------------------------------------------------------------------


def test_open_session_creates_a_record(user):
    session_id = uuid.uuid4()
    thread_id = uuid.uuid4()

    result = records.open_session(
        session_id,
        user,
        channel="chan.one",
        new_fields=fields(thread_id=thread_id, client_type="copilot", chat_profile="Pro"),
    )

    assert result.restored is False
    assert result.previous_channel == ""
    record = SocketSession.objects.get(pk=session_id)
    assert record.user_id == user.pk
    assert record.thread_id == thread_id
    assert record.client_type == "copilot"
    assert record.chat_profile == "Pro"
    assert record.user_env == {"lang": "en"}
    assert record.socket_channel == "chan.one"
    assert record.is_connected
    assert not (record.chat_started or record.resumed or record.has_first_interaction or record.ended)


def test_open_session_restores_rebinding_only_the_socket(user):
    session_id = uuid.uuid4()
    thread_id = uuid.uuid4()
    first = records.open_session(session_id, user, channel="chan.one", new_fields=fields(thread_id=thread_id))
    assert records.claim_flag(session_id, "chat_started")
    records.set_fields(session_id, user_session={"color": "blue"})
    assert records.mark_disconnected(session_id, "chan.one")

    again = records.open_session(
        session_id,
        user,
        channel="chan.two",
        new_fields=fields(thread_id=uuid.uuid4(), client_type="slack", user_env={"lang": "fr"}),
    )

    assert again.restored is True
    assert again.previous_channel == ""  # it was disconnected
    assert again.record.generation == first.record.generation + 1
    record = SocketSession.objects.get(pk=session_id)
    assert record.socket_channel == "chan.two"
    assert record.disconnected_at is None
    assert record.generation == again.record.generation
    # Nothing else is reset or overwritten by the new connect's fields.
    assert record.thread_id == thread_id
    assert record.client_type == "webapp"
    assert record.user_env == {"lang": "en"}
    assert record.chat_started is True
    assert record.user_session == {"color": "blue"}
    assert SocketSession.objects.count() == 1


def test_open_session_while_connected_reports_the_previous_channel(user):
    session_id = uuid.uuid4()
    records.open_session(session_id, user, channel="chan.old", new_fields=fields())
    again = records.open_session(session_id, user, channel="chan.new", new_fields=fields())
    assert again.restored is True
    assert again.previous_channel == "chan.old"
    # The old socket's late disconnect does not unbind the new one.
    assert records.mark_disconnected(session_id, "chan.old") is False
    assert SocketSession.objects.get(pk=session_id).socket_channel == "chan.new"


def test_open_session_refuses_another_users_session(user, other_user):
    session_id = uuid.uuid4()
    records.open_session(session_id, user, channel="chan.one", new_fields=fields())

    with pytest.raises(SessionNotOwned):
        records.open_session(session_id, other_user, channel="chan.evil", new_fields=fields())

    record = SocketSession.objects.get(pk=session_id)
    assert record.user_id == user.pk
    assert record.socket_channel == "chan.one"
    assert record.generation == 0


def test_open_session_replaces_an_ended_record(user):
    session_id = uuid.uuid4()
    old_thread = uuid.uuid4()
    new_thread = uuid.uuid4()
    records.open_session(session_id, user, channel="chan.one", new_fields=fields(thread_id=old_thread))
    assert records.defer_step(session_id, {"id": str(uuid.uuid4()), "output": "old greeting"})
    records.claim_flag(session_id, "chat_started")
    records.claim_flag(session_id, "has_first_interaction")
    records.set_fields(session_id, user_session={"old": True})
    assert records.claim_end(session_id)

    result = records.open_session(
        session_id, user, channel="chan.two", new_fields=fields(thread_id=new_thread)
    )

    assert result.restored is False
    record = SocketSession.objects.get(pk=session_id)
    assert record.thread_id == new_thread
    assert record.socket_channel == "chan.two"
    assert not (record.ended or record.chat_started or record.has_first_interaction)
    assert record.deferred_steps == []
    assert record.user_session == {}
    # The fresh session can start again.
    assert records.claim_flag(session_id, "chat_started") is True


# --- claim_flag -----------------------------------------------------------------------------


@pytest.mark.parametrize("flag", records.CLAIMABLE_FLAGS)
def test_claim_flag_wins_once(user, flag):
    record = opened(user)
    assert records.claim_flag(record.pk, flag) is True
    assert records.claim_flag(record.pk, flag) is False
    assert records.claim_flag(record.pk, flag) is False
    assert getattr(SocketSession.objects.get(pk=record.pk), flag) is True


def test_claim_flag_flags_are_independent(user):
    record = opened(user)
    assert records.claim_flag(record.pk, "chat_started")
    assert records.claim_flag(record.pk, "resumed")
    assert records.claim_flag(record.pk, "has_first_interaction")


def test_claim_flag_refuses_unknown_flags_and_ended_or_missing_sessions(user):
    record = opened(user)
    with pytest.raises(ValueError):
        records.claim_flag(record.pk, "ended")
    assert records.claim_flag(uuid.uuid4(), "chat_started") is False
    assert records.claim_end(record.pk)
    assert records.claim_flag(record.pk, "chat_started") is False


@pytest.mark.django_db(transaction=True)
def test_claim_flag_from_8_threads_has_exactly_one_winner(user):
    record = opened(user)

    wins = run_in_threads(8, lambda i: records.claim_flag(record.pk, "chat_started"))

    assert wins.count(True) == 1
    assert wins.count(False) == 7
    assert SocketSession.objects.get(pk=record.pk).chat_started is True


@pytest.mark.django_db(transaction=True)
def test_claim_end_from_8_threads_has_exactly_one_winner(user):
    record = opened(user)
    records.mark_disconnected(record.pk, record.socket_channel)
    cutoff = timezone.now() + timedelta(seconds=5)

    wins = run_in_threads(8, lambda i: records.claim_end(record.pk, expired_before=cutoff if i % 2 else None))

    assert wins.count(True) == 1


# --- claim_end / expiry ---------------------------------------------------------------------


def test_claim_end_without_cutoff_claims_once_even_when_connected(user):
    record = opened(user)
    assert records.claim_end(record.pk) is True
    assert records.claim_end(record.pk) is False
    assert SocketSession.objects.get(pk=record.pk).ended is True


def test_claim_end_with_cutoff_only_claims_sessions_disconnected_long_enough(user):
    connected = opened(user, channel="chan.live")
    recent = opened(user, channel="chan.recent")
    old = opened(user, channel="chan.old")
    now = timezone.now()
    assert records.mark_disconnected(recent.pk, "chan.recent")
    assert records.mark_disconnected(old.pk, "chan.old")
    records.set_fields(old.pk, disconnected_at=now - timedelta(hours=2))
    # A connected session with a stale disconnected_at (should never happen) is still live.
    records.set_fields(connected.pk, disconnected_at=now - timedelta(hours=2))
    cutoff = now - timedelta(hours=1)

    assert records.expired_session_ids(3600) == [old.pk]
    assert records.claim_end(connected.pk, expired_before=cutoff) is False
    assert records.claim_end(recent.pk, expired_before=cutoff) is False
    assert records.claim_end(old.pk, expired_before=cutoff) is True
    assert records.claim_end(old.pk, expired_before=cutoff) is False
    assert records.claim_end(old.pk) is False
    assert records.expired_session_ids(3600) == []

    ended = dict(SocketSession.objects.values_list("id", "ended"))
    assert ended == {connected.pk: False, recent.pk: False, old.pk: True}


def test_a_reconnect_before_expiry_prevents_the_claim(user):
    session_id = uuid.uuid4()
    records.open_session(session_id, user, channel="chan.one", new_fields=fields())
    records.mark_disconnected(session_id, "chan.one")
    records.set_fields(session_id, disconnected_at=timezone.now() - timedelta(hours=2))
    cutoff = timezone.now() - timedelta(hours=1)

    records.open_session(session_id, user, channel="chan.two", new_fields=fields())

    assert records.claim_end(session_id, expired_before=cutoff) is False
    assert SocketSession.objects.get(pk=session_id).ended is False


# --- deferred steps -------------------------------------------------------------------------


def step(output: str, step_id: str | None = None) -> dict[str, Any]:
    return {"id": step_id or str(uuid.uuid4()), "type": "assistant_message", "output": output}


def test_defer_step_keeps_steps_until_the_first_interaction(user):
    record = opened(user)
    greeting = step("hello")
    hint = step("try asking")

    assert records.defer_step(record.pk, greeting) is True
    assert records.defer_step(record.pk, hint) is True
    assert records.defer_step(record.pk, {**greeting, "output": "hello!"}) is True  # same id: replaced

    assert records.claim_flag(record.pk, "has_first_interaction")
    assert records.defer_step(record.pk, step("too late")) is False

    taken = records.take_deferred_steps(record.pk)
    assert len(taken) == 2
    assert {s["id"]: s["output"] for s in taken} == {greeting["id"]: "hello!", hint["id"]: "try asking"}
    assert records.take_deferred_steps(record.pk) == []
    assert SocketSession.objects.get(pk=record.pk).deferred_steps == []


def test_defer_step_on_an_ended_session_drops_the_step():
    # True: handled (there is no thread to write it to), so the caller must not write it.
    assert records.defer_step(uuid.uuid4(), step("x")) is True
    assert records.take_deferred_steps(uuid.uuid4()) == []


# --- save_user_session ----------------------------------------------------------------------


def test_save_user_session_writes_the_record_and_merges_into_the_thread(user):
    thread, _ = ensure_thread(user, uuid.uuid4(), name="chat")
    Thread.objects.filter(pk=thread.pk).update(metadata={"older": "kept", "color": "red"})
    record = opened(user, thread_id=thread.pk)
    persistable = {"color": "blue", "count": 3, "env": {}, "chat_profile": "Pro"}

    records.save_user_session(
        record.pk,
        thread_id=thread.pk,
        persistable=persistable,
        chat_profile="Pro",
        chat_settings={"temperature": 0.2},
    )

    record.refresh_from_db()
    assert record.user_session == persistable
    assert record.chat_profile == "Pro"
    assert record.chat_settings == {"temperature": 0.2}
    thread.refresh_from_db()
    assert thread.metadata == {"older": "kept", "color": "blue", "count": 3, "env": {}, "chat_profile": "Pro"}
    assert thread.chat_profile == "Pro"
    assert thread.chat_settings == {"temperature": 0.2}


def test_save_user_session_before_the_thread_exists_writes_only_the_record(user):
    thread_id = uuid.uuid4()
    record = opened(user, thread_id=thread_id)

    records.save_user_session(
        record.pk, thread_id=None, persistable={"a": 1}, chat_profile="", chat_settings={}
    )
    records.save_user_session(
        record.pk, thread_id=thread_id, persistable={"a": 2}, chat_profile="", chat_settings={}
    )  # the thread row is missing: no error

    record.refresh_from_db()
    assert record.user_session == {"a": 2}
    assert not Thread.objects.filter(pk=thread_id).exists()


def test_get_session_and_delete_session(user):
    record = opened(user)
    got = records.get_session(record.pk)
    assert got is not None and got.pk == record.pk
    records.delete_session(record.pk)
    assert records.get_session(record.pk) is None
