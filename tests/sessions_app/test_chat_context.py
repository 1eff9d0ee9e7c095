"""What hooks see of their session: chat context, user session, and the persisted user session."""

import importlib
import logging
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from sessions_app import records
from sessions_app.chat.context import (
    SYSTEM_KEYS,
    ChatContext,
    chat_context,
    current_session,
    require_session,
    user_session,
)
from sessions_app.chat.message import Message
from sessions_app.chat.step import Step
from sessions_app.live import LiveSession
from sessions_app.turns import stop_handlers
from threads_app.models import Thread
from threads_app.selectors import step_dicts
from threads_app.services import ensure_thread, upsert_step

pytestmark = pytest.mark.django_db


def message(
    content: str, *, seq: int | None = None, id: uuid.UUID | None = None, type: str = "user_message"
) -> Message:
    m = Message(content, id=id, type=type)
    m.seq = seq
    return m


# --- ChatContext ----------------------------------------------------------------------------


def test_chat_context_deduplicates_by_step_id_not_identity():
    context = ChatContext()
    step_id = uuid.uuid4()
    context.add(message("draft", id=step_id, seq=1))
    context.add(message("final", id=step_id, seq=1))  # another object, same id

    assert len(context) == 1
    assert [m.content for m in context.get()] == ["final"]


def test_chat_context_orders_by_transcript_seq_then_unsaved_in_arrival_order():
    context = ChatContext()
    context.add(message("third", seq=3))
    context.add(message("pending-a"))
    context.add(message("first", seq=1))
    context.add(message("pending-b"))
    context.add(message("second", seq=2))

    assert [m.content for m in context.get()] == ["first", "second", "third", "pending-a", "pending-b"]


def test_chat_context_a_message_gets_its_seq_later_and_moves_into_place():
    context = ChatContext()
    later = message("streamed")
    context.add(later)
    context.add(message("old", seq=1))
    assert [m.content for m in context.get()] == ["old", "streamed"]

    context.add(message("earlier", seq=2))
    saved = message("streamed", id=later.id, seq=3)
    context.add(saved)
    assert [m.content for m in context.get()] == ["old", "earlier", "streamed"]
    assert len(context) == 3


def test_chat_context_remove_and_clear_by_id():
    context = ChatContext()
    kept = message("kept", seq=1)
    gone = message("gone", seq=2)
    context.add(kept)
    context.add(gone)

    assert context.remove(message("other object", id=gone.id)) is True
    assert context.remove(gone) is False
    assert [m.id for m in context.get()] == [kept.id]

    context.add(gone)  # can come back after removal
    assert [m.content for m in context.get()] == ["kept", "gone"]

    context.clear()
    assert len(context) == 0
    assert context.get() == []


def test_chat_context_load_makes_its_entries_at_the_first_read_only():
    context = ChatContext()
    calls: list[str] = []

    def loaded() -> list[Message]:
        calls.append("made")
        return [message("first", seq=1), message("second", seq=2)]

    context.load(loaded)
    context.add(message("live, unsaved", type="assistant_message"))
    assert calls == [], "a load made its entries before anything read the context"

    assert [m.content for m in context.get()] == ["first", "second", "live, unsaved"]
    assert len(context) == 3
    assert calls == ["made"], f"the loaded entries were made {len(calls)} times"


def test_chat_context_clear_forgets_a_load_not_made_yet():
    context = ChatContext()
    context.load(lambda: pytest.fail("a cleared load was made"))
    context.clear()

    assert context.get() == []
    assert len(context) == 0


# --- LiveSession fixtures -------------------------------------------------------------------


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user(username="hook-user", password="pw-for-tests-1")


@pytest.fixture
def make_live(user) -> Iterator[Any]:
    made: list[LiveSession] = []

    def make(**new_fields: Any) -> LiveSession:
        defaults: dict[str, Any] = {
            "thread_id": uuid.uuid4(),
            "client_type": "webapp",
            "chat_profile": "Pro",
            "chat_settings": {"temperature": 0.3},
            "user_env": {"API_KEY": "secret"},
        }
        defaults.update(new_fields)
        record = records.open_session(uuid.uuid4(), user, channel="chan.test", new_fields=defaults).record
        live = LiveSession(record, user)
        made.append(live)
        return live

    yield make
    for live in made:
        stop_handlers.forget(live.id)


@pytest.fixture
def active(make_live) -> Iterator[LiveSession]:
    live = make_live()
    token = live.activate()
    yield live
    live.deactivate(token)


# --- user_session accessor ------------------------------------------------------------------


def test_user_session_set_and_get(active):
    user_session.set("color", "blue")
    assert user_session.get("color") == "blue"
    assert user_session.get("missing") is None
    assert user_session.get("missing", 7) == 7
    assert active.user_session == {"color": "blue"}


def test_user_session_system_keys_are_read_only(active, user):
    for key in SYSTEM_KEYS:
        with pytest.raises(KeyError):
            user_session.set(key, "overwritten")
    assert user_session.get("id") == str(active.id)
    assert user_session.get("env") == {"API_KEY": "secret"}
    assert user_session.get("chat_profile") == "Pro"
    assert user_session.get("chat_settings") == {"temperature": 0.3}
    assert user_session.get("client_type") == "webapp"
    assert user_session.get("user") == user
    assert active.user_session == {}


def test_accessors_outside_a_session_fail_clearly():
    assert current_session.get() is None
    with pytest.raises(RuntimeError):
        require_session()
    with pytest.raises(RuntimeError):
        user_session.get("x")
    with pytest.raises(RuntimeError):
        chat_context.get()


def test_chat_context_accessor_reads_the_current_session(active):
    active.chat_context.add(message("hi", seq=1))
    active.chat_context.add(message("hello", seq=2, type="assistant_message"))
    assert [m.content for m in chat_context.get()] == ["hi", "hello"]
    assert chat_context.to_openai() == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ]


def test_a_record_with_system_keys_in_its_user_session_does_not_leak_them(user, make_live):
    live = make_live()
    records.set_fields(live.id, user_session={"env": {"x": 1}, "id": "forged", "color": "green"})
    record = records.get_session(live.id)
    assert record is not None
    rebuilt = LiveSession(record, user)
    try:
        assert rebuilt.user_session == {"color": "green"}
        assert rebuilt.system_value("id") == str(live.id)
    finally:
        stop_handlers.forget(rebuilt.id)


# --- to_persistable -------------------------------------------------------------------------


class NotJson:
    pass


def test_to_persistable_keeps_json_values_and_scrubs_env(make_live, settings):
    settings.PERSIST_USER_ENV = False
    live = make_live()
    live.user_session.update({"color": "blue", "count": 3, "tags": ["a", {"b": None}]})

    data = live.to_persistable()

    assert data == {
        "color": "blue",
        "count": 3,
        "tags": ["a", {"b": None}],
        "chat_settings": {"temperature": 0.3},
        "chat_profile": "Pro",
        "client_type": "webapp",
        "env": {},
    }


def test_to_persistable_keeps_env_when_configured(make_live, settings):
    settings.PERSIST_USER_ENV = True
    live = make_live()
    assert live.to_persistable()["env"] == {"API_KEY": "secret"}


def test_to_persistable_drops_non_json_values_with_a_warning(make_live, caplog):
    live = make_live()
    live.user_session.update(
        {"ok": "yes", "handle": NotJson(), "nested": {"inner": {1, 2}}, "when": datetime.now(UTC)}
    )

    with caplog.at_level(logging.WARNING, logger="sessions_app.live"):
        data = live.to_persistable()

    assert data["ok"] == "yes"
    for key in ("handle", "nested", "when"):
        assert key not in data
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and r.name == "sessions_app.live"]
    messages = [r.getMessage() for r in warnings]
    assert len(warnings) == 3
    for key in ("handle", "nested", "when"):
        assert any(repr(key) in m and str(live.id) in m for m in messages)
    # The live value itself is untouched: the hook can still use it in this process.
    assert isinstance(live.user_session["handle"], NotJson)


def test_to_persistable_drops_nan_which_is_not_json(make_live, caplog):
    live = make_live()
    live.user_session.update({"score": float("nan"), "fine": 1.5})

    with caplog.at_level(logging.WARNING, logger="sessions_app.live"):
        data = live.to_persistable()

    assert "score" not in data
    assert data["fine"] == 1.5
    assert any("'score'" in r.getMessage() for r in caplog.records)


def test_persisted_user_session_saves_and_restores(user, make_live, settings):
    settings.PERSIST_USER_ENV = False
    thread, _ = ensure_thread(user, uuid.uuid4(), name="chat")
    live = make_live(thread_id=thread.pk)
    live.user_session.update({"color": "blue", "bad": NotJson(), "ratio": float("inf")})

    records.save_user_session(
        live.id,
        thread_id=thread.pk,
        persistable=live.to_persistable(),
        chat_profile=live.chat_profile,
        chat_settings=live.chat_settings,
    )

    metadata = Thread.objects.get(pk=thread.pk).metadata
    assert metadata["color"] == "blue"
    assert metadata["env"] == {}
    assert "bad" not in metadata and "ratio" not in metadata

    fresh = make_live(chat_profile="", chat_settings={}, user_env={"API_KEY": "new"})
    fresh.restore_from_metadata(metadata)
    assert fresh.user_session == {"color": "blue"}
    assert fresh.chat_profile == "Pro"
    assert fresh.chat_settings == {"temperature": 0.3}
    assert fresh.user_env == {"API_KEY": "new"}


# --- restore_from_metadata ------------------------------------------------------------------


def test_restore_from_metadata_takes_user_keys_profile_and_settings(make_live):
    live = make_live(chat_profile="Basic", chat_settings={"a": 1}, user_env={"k": "v"})
    live.user_session["stale"] = True

    live.restore_from_metadata(
        {
            "color": "red",
            "count": 2,
            "env": {"k": "persisted"},
            "id": "someone-elses",
            "client_type": "slack",
            "user": "forged",
            "chat_profile": "Pro",
            "chat_settings": {"b": 2},
        }
    )

    assert live.user_session == {"color": "red", "count": 2}
    assert live.chat_profile == "Pro"
    assert live.chat_settings == {"b": 2}
    assert live.user_env == {"k": "v"}
    assert live.client_type == "webapp"


def test_restore_from_metadata_without_profile_or_settings_keeps_the_current_ones(make_live):
    live = make_live(chat_profile="Basic", chat_settings={"a": 1})
    live.restore_from_metadata({"color": "red", "chat_profile": "", "chat_settings": "not a dict"})
    assert live.user_session == {"color": "red"}
    assert live.chat_profile == "Basic"
    assert live.chat_settings == {"a": 1}


# --- load_context ---------------------------------------------------------------------------


def test_load_context_twice_gives_the_same_list(user, make_live):
    thread, _ = ensure_thread(user, uuid.uuid4(), name="history")
    ids = []
    for i, kind in enumerate(["user_message", "run", "assistant_message", "tool", "user_message"]):
        step = upsert_step(thread.pk, uuid.uuid4(), type=kind, name=kind, output=f"line {i}")
        ids.append((kind, step.id))
    live = make_live(thread_id=thread.pk)

    live.load_context(step_dicts(thread.pk, messages_only=True))
    first = [(m.id, m.content, m.seq) for m in live.chat_context.get()]
    live.load_context(step_dicts(thread.pk, messages_only=True))
    second = [(m.id, m.content, m.seq) for m in live.chat_context.get()]

    assert first == second
    assert [content for _id, content, _seq in first] == ["line 0", "line 2", "line 4"]
    assert [step_id for step_id, _c, _s in first] == [i for kind, i in ids if "message" in kind]
    assert [seq for _id, _c, seq in first] == [1, 3, 5]
    assert len(live.chat_context) == 3


def test_load_context_takes_steps_too_and_merges_with_live_messages(user, make_live):
    thread, _ = ensure_thread(user, uuid.uuid4(), name="history")
    upsert_step(thread.pk, uuid.uuid4(), type="user_message", output="q")
    tool = upsert_step(thread.pk, uuid.uuid4(), type="tool", name="calc", input="2+2", output="4")
    answer = upsert_step(thread.pk, uuid.uuid4(), type="assistant_message", output="a")
    live = make_live(thread_id=thread.pk)
    unsaved = message("typing...", type="assistant_message")
    live.chat_context.add(unsaved)
    live.chat_context.add(Message.from_step(step_dicts(thread.pk)[-1]))  # already known by id

    live.load_context(step_dicts(thread.pk))  # all steps, not only messages
    live.load_context(step_dicts(thread.pk))

    entries = live.chat_context.get()
    assert [m.content for m in entries] == ["q", "4", "a", "typing..."]
    assert isinstance(entries[1], Step) and entries[1].id == tool.id and entries[1].input == "2+2"
    assert entries[2].id == answer.id


def test_the_kept_order_matches_a_full_sort_through_any_adds_and_removes():
    """The context keeps its sorted list between reads; whatever the order of adds (with and
    without seq, repeats of an id, removals), a read equals sorting everything afresh."""
    import random

    rng = random.Random(7)
    context = ChatContext()
    messages: list[Message] = []
    order: dict[uuid.UUID, int] = {}  # when each message was first added
    for step in range(400):
        action = rng.random()
        if action < 0.55 or not messages:
            message = Message(f"m{step}")
            message.seq = rng.choice([None, step, rng.randrange(step + 1)])
            messages.append(message)
            order[message.id] = step
            context.add(message)
        elif action < 0.8:
            again = rng.choice(messages)
            again.seq = rng.choice([again.seq, step])
            context.add(again)
        else:
            context.remove(messages.pop(rng.randrange(len(messages))))
        expected = sorted(messages, key=lambda m: (m.seq if m.seq is not None else float("inf"), order[m.id]))
        assert [m.id for m in context.get()] == [m.id for m in expected], step
        assert len(context) == len(messages)


def test_a_reply_that_gets_its_seq_keeps_the_sorted_list(monkeypatch):
    """A turn's reply is added before it is written (no seq) and again once written: it still
    sorts last, so the kept list is updated in place, not sorted again on the next read (a
    hook reading the context every turn would otherwise sort the whole conversation)."""
    sorts: list[int] = []

    def counted_sorted(entries: Any, **kwargs: Any) -> list[Any]:
        entries = list(entries)
        sorts.append(len(entries))
        return sorted(entries, **kwargs)

    # The module, not ``sessions_app.chat.context`` the attribute (the accessor of that name).
    monkeypatch.setattr(
        importlib.import_module("sessions_app.chat.context"), "sorted", counted_sorted, raising=False
    )
    context = ChatContext()
    for seq in range(50):
        message = Message(f"m{seq}")
        message.seq = seq
        context.add(message)
    reply = Message("reply")
    context.add(reply)
    assert context.get()[-1] is reply
    reply.seq = 50
    context.add(reply)
    assert [m.content for m in context.get()] == [f"m{seq}" for seq in range(50)] + ["reply"]
    assert sorts == [], f"reads sorted the whole context again: {sorts}"
