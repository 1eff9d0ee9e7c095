"""Thread creation and transcript writes: idempotent step ids, per-thread seqs, row locking."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from tests.support.concurrency import run_in_threads
from threads_app.models import Box, Step, Thread
from threads_app.services import (
    THREAD_NAME_MAX,
    ThreadNotOwned,
    default_box_for,
    delete_step,
    ensure_thread,
    save_thread_session,
    upsert_step,
)
from threads_app.titles import TITLE_MAX, thread_title

pytestmark = pytest.mark.django_db


@pytest.fixture
def thread(user) -> Thread:
    thread, _ = ensure_thread(user, uuid.uuid4(), name="chat")
    return thread


# --- upsert_step ----------------------------------------------------------------------------


def test_same_step_id_twice_is_one_row_keeping_its_seq_and_taking_the_new_output(thread):
    first = uuid.uuid4()
    upsert_step(thread.id, first, type="assistant_message", name="bot", output="draft")
    upsert_step(thread.id, uuid.uuid4(), type="user_message", name="me", output="hello")

    again = upsert_step(thread.id, first, type="assistant_message", name="bot", output="final")

    assert Step.objects.filter(pk=first).count() == 1
    assert Step.objects.filter(thread=thread).count() == 2
    row = Step.objects.get(pk=first)
    assert row.seq == 1
    assert again.seq == 1
    assert row.output == "final"
    # The rewrite handed out no seq: the next new step follows directly.
    assert upsert_step(thread.id, uuid.uuid4(), type="user_message", output="next").seq == 3
    thread.refresh_from_db()
    assert thread.last_seq == 3


def test_rewrite_keeps_the_original_created_at(thread):
    step_id = uuid.uuid4()
    created = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    upsert_step(thread.id, step_id, type="assistant_message", output="a", created_at=created)
    upsert_step(thread.id, step_id, type="assistant_message", output="b", created_at=created + timedelta(1))
    assert Step.objects.get(pk=step_id).created_at == created


def test_seqs_increase_per_thread_independently(user):
    one, _ = ensure_thread(user, uuid.uuid4())
    two, _ = ensure_thread(user, uuid.uuid4())
    for i in range(4):
        upsert_step(one.id, uuid.uuid4(), type="user_message", output=f"one {i}")
        upsert_step(two.id, uuid.uuid4(), type="user_message", output=f"two {i}")
    upsert_step(one.id, uuid.uuid4(), type="assistant_message", output="one 4")

    assert list(Step.objects.filter(thread=one).order_by("seq").values_list("seq", "output")) == [
        (1, "one 0"),
        (2, "one 1"),
        (3, "one 2"),
        (4, "one 3"),
        (5, "one 4"),
    ]
    assert list(Step.objects.filter(thread=two).order_by("seq").values_list("seq", flat=True)) == [1, 2, 3, 4]


def test_upsert_sets_a_creation_time_when_none_is_given(thread):
    before = datetime.now(UTC)
    step = upsert_step(thread.id, uuid.uuid4(), type="user_message", output="hi", created_at=None)
    assert Step.objects.get(pk=step.pk).created_at >= before - timedelta(seconds=1)


def test_delete_step_removes_only_that_threads_row(user, thread):
    other, _ = ensure_thread(user, uuid.uuid4())
    keep = upsert_step(thread.id, uuid.uuid4(), type="user_message", output="keep")
    gone = upsert_step(thread.id, uuid.uuid4(), type="user_message", output="gone")

    delete_step(other.id, gone.id)  # wrong thread: nothing happens
    assert Step.objects.filter(pk=gone.id).exists()

    delete_step(thread.id, gone.id)
    assert list(Step.objects.filter(thread=thread).values_list("id", flat=True)) == [keep.id]


# --- ensure_thread --------------------------------------------------------------------------


def test_ensure_thread_creates_once(user):
    thread_id = uuid.uuid4()
    thread, created = ensure_thread(user, thread_id, name="first message")
    again, created_again = ensure_thread(user, thread_id, name="second message")

    assert created is True
    assert created_again is False
    assert again.pk == thread.pk == thread_id
    assert Thread.objects.filter(pk=thread_id).count() == 1
    assert Thread.objects.get(pk=thread_id).name == "first message"
    assert thread.owner_id == user.pk
    assert thread.box_id == default_box_for(user).pk
    assert Box.objects.filter(owner=user).count() == 1


def test_ensure_thread_refuses_another_users_id(user, other_user):
    thread_id = uuid.uuid4()
    ensure_thread(user, thread_id, name="mine")

    with pytest.raises(ThreadNotOwned):
        ensure_thread(other_user, thread_id, name="theirs")

    thread = Thread.objects.get(pk=thread_id)
    assert thread.owner_id == user.pk
    assert thread.name == "mine"
    assert not Box.objects.filter(owner=other_user).exists()


def test_ensure_thread_refuses_a_deleted_thread(user):
    thread, _ = ensure_thread(user, uuid.uuid4(), name="old")
    Thread.objects.filter(pk=thread.pk).update(deleted_at=datetime.now(UTC))
    with pytest.raises(ThreadNotOwned):
        ensure_thread(user, thread.pk)


def test_ensure_thread_names_the_thread_after_the_first_message_as_a_title(user):
    text = "!slow 0.2\n# The **plan**\n" + "word " * 100
    thread, _ = ensure_thread(user, uuid.uuid4(), name=text)
    stored = Thread.objects.get(pk=thread.pk).name
    assert stored == thread_title(text)
    assert stored.startswith("The plan word word") and stored.endswith("…")
    assert len(stored) <= TITLE_MAX < THREAD_NAME_MAX

    short, _ = ensure_thread(user, uuid.uuid4(), name="what's the weather?")
    assert Thread.objects.get(pk=short.pk).name == "what's the weather?"


# --- save_thread_session --------------------------------------------------------------------


def test_save_thread_session_merges_metadata_and_sets_profile_and_settings(thread):
    Thread.objects.filter(pk=thread.pk).update(metadata={"kept": 1, "color": "red"})
    save_thread_session(
        thread.id, metadata={"color": "blue", "n": 2}, chat_profile="gpt", chat_settings={"t": 0.5}
    )
    thread.refresh_from_db()
    assert thread.metadata == {"kept": 1, "color": "blue", "n": 2}
    assert thread.chat_profile == "gpt"
    assert thread.chat_settings == {"t": 0.5}

    save_thread_session(
        uuid.uuid4(), metadata={"x": 1}, chat_profile="", chat_settings={}
    )  # no thread: no-op


def test_a_threads_profile_is_set_at_creation_and_never_changes(user):
    thread, created = ensure_thread(user, uuid.uuid4(), name="chat", chat_profile="Reverse")
    assert created and thread.chat_profile == "Reverse"
    again, created = ensure_thread(user, thread.pk, name="chat", chat_profile="Echo")
    assert not created and again.chat_profile == "Reverse"

    save_thread_session(
        thread.id, metadata={"chat_profile": "Echo", "n": 1}, chat_profile="Echo", chat_settings={}
    )
    thread.refresh_from_db()
    assert thread.chat_profile == "Reverse"
    assert thread.metadata == {"chat_profile": "Reverse", "n": 1}


# --- concurrency (real OS threads; meaningful on PostgreSQL, also runs on SQLite) -----------


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_of_one_thread_get_seqs_exactly_1_to_200(user):
    thread, _ = ensure_thread(user, uuid.uuid4(), name="busy")

    def write(worker: int) -> None:
        for i in range(25):
            upsert_step(thread.id, uuid.uuid4(), type="assistant_message", output=f"w{worker} #{i}")

    run_in_threads(8, write)

    seqs = sorted(Step.objects.filter(thread=thread).values_list("seq", flat=True))
    assert len(seqs) == 200
    assert seqs == list(range(1, 201))
    thread.refresh_from_db()
    assert thread.last_seq == 200
    # Each writer's own steps came out in the order it wrote them.
    for worker in range(8):
        outputs = list(
            Step.objects.filter(thread=thread, output__startswith=f"w{worker} #")
            .order_by("seq")
            .values_list("output", flat=True)
        )
        assert outputs == [f"w{worker} #{i}" for i in range(25)]


@pytest.mark.django_db(transaction=True)
def test_concurrent_upserts_of_the_same_id_give_one_row(user):
    thread, _ = ensure_thread(user, uuid.uuid4(), name="race")
    step_id = uuid.uuid4()

    def write(worker: int) -> int:
        return upsert_step(thread.id, step_id, type="assistant_message", output=f"from {worker}").seq

    seqs = run_in_threads(8, write)

    assert seqs == [1] * 8
    rows = list(Step.objects.filter(pk=step_id).values_list("thread_id", "seq", "output"))
    assert len(rows) == 1
    assert rows[0][:2] == (thread.id, 1)
    assert rows[0][2] in {f"from {i}" for i in range(8)}
    assert Step.objects.filter(thread=thread).count() == 1
    thread.refresh_from_db()
    assert thread.last_seq == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_ensure_thread_of_the_same_id_creates_one_thread(user):
    thread_id = uuid.uuid4()

    results = run_in_threads(8, lambda i: ensure_thread(user, thread_id, name=f"name {i}"))

    assert sum(1 for _thread, created in results if created) == 1
    assert {thread.pk for thread, _created in results} == {thread_id}
    assert Thread.objects.filter(pk=thread_id).count() == 1
    assert Box.objects.filter(owner=user).count() == 1
