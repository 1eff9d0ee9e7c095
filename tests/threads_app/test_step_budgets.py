"""What a step and a thread may hold: text cut at STEP_MAX_BYTES with a marker, a thread's
text counted in ``Thread.text_bytes`` and kept under THREAD_MAX_BYTES (on both databases'
write paths: the one-statement append on PostgreSQL, the ORM elsewhere and for updates)."""

import uuid

import pytest

from threads_app import step_budgets
from threads_app.models import Step, Thread
from threads_app.services import ensure_thread, finish_tool_step, upsert_step
from threads_app.step_budgets import THREAD_FULL_TEXT, TRUNCATED_KEY, StreamAllowance, cap_text, cut_to

pytestmark = pytest.mark.django_db


@pytest.fixture
def thread(user) -> Thread:
    return ensure_thread(user, uuid.uuid4(), name="budgets")[0]


def text_bytes_of(thread: Thread) -> int:
    return Thread.objects.values_list("text_bytes", flat=True).get(pk=thread.pk)


def test_a_text_within_the_budget_is_kept_as_it_is(settings):
    settings.STEP_MAX_BYTES = 10
    assert cap_text("0123456789") == ("0123456789", False)


def test_a_longer_text_is_cut_on_a_character_boundary_and_says_so(settings):
    settings.STEP_MAX_BYTES = 110  # 10 bytes of text, and the marker's room
    text, cut = cap_text("é" * 60)  # 120 bytes of UTF-8
    assert cut
    assert text == "ééééé\n\n[truncated: 120 bytes, over the limit of 110 bytes a step]"
    assert cut_to("aé", 2) == "a"  # never half of "é"
    assert cap_text(text) == (text, False)  # a cut text is within the budget: cut once


def test_a_step_over_the_budget_is_stored_cut_and_marked(settings, thread):
    settings.STEP_MAX_BYTES = 200
    step = upsert_step(thread.pk, uuid.uuid4(), type="assistant_message", output="x" * 1000, input="y" * 50)
    stored = Step.objects.get(pk=step.pk)
    assert stored.output == "x" * 100 + "\n\n[truncated: 1000 bytes, over the limit of 200 bytes a step]"
    assert stored.input == "y" * 50
    assert stored.metadata[TRUNCATED_KEY] is True
    assert text_bytes_of(thread) == len(stored.output) + 50


def test_the_thread_counts_its_text_through_inserts_and_updates(thread):
    step_id = uuid.uuid4()
    upsert_step(thread.pk, step_id, type="assistant_message", output="hello")
    upsert_step(thread.pk, uuid.uuid4(), type="user_message", output="é")
    assert text_bytes_of(thread) == 5 + 2
    upsert_step(thread.pk, step_id, type="assistant_message", output="hello world")  # an update
    assert text_bytes_of(thread) == 11 + 2
    upsert_step(thread.pk, step_id, type="assistant_message", output="")
    assert text_bytes_of(thread) == 2


def test_past_the_thread_budget_a_new_step_keeps_only_the_marker(settings, thread):
    settings.THREAD_MAX_BYTES = 100
    upsert_step(thread.pk, uuid.uuid4(), type="user_message", output="a" * 60)
    upsert_step(thread.pk, uuid.uuid4(), type="assistant_message", output="b" * 30)
    full = upsert_step(thread.pk, uuid.uuid4(), type="assistant_message", output="c" * 30)
    stored = Step.objects.get(pk=full.pk)
    assert (stored.output, stored.metadata[TRUNCATED_KEY], stored.seq) == (THREAD_FULL_TEXT, True, 3)
    assert text_bytes_of(thread) == 90 + len(THREAD_FULL_TEXT)


def test_an_update_cannot_grow_a_step_past_the_thread_budget(settings, thread):
    settings.THREAD_MAX_BYTES = 100
    step_id = uuid.uuid4()
    upsert_step(thread.pk, step_id, type="tool", output="short")
    upsert_step(thread.pk, step_id, type="tool", output="z" * 500)
    assert Step.objects.get(pk=step_id).output == THREAD_FULL_TEXT


def test_a_tool_result_is_cut_and_counted(settings, thread):
    settings.STEP_MAX_BYTES = 120
    step = upsert_step(thread.pk, uuid.uuid4(), type="tool", output="")
    finish_tool_step(step.pk, output="r" * 200, is_error=False)
    stored = Step.objects.get(pk=step.pk)
    assert stored.output.startswith("r" * 20 + "\n\n[truncated") and stored.metadata[TRUNCATED_KEY]
    assert text_bytes_of(thread) == len(stored.output)


def test_a_stream_stops_at_the_budget_with_one_marker(settings):
    settings.STEP_MAX_BYTES = 110  # tokens fill 10 bytes, the marker's room stays free
    allowance = StreamAllowance("abc")
    assert allowance.fit("defg") == "defg"
    crossing = allowance.fit("hijklm")
    assert crossing == "hij\n\n[truncated: the streamed text, over the limit of 110 bytes a step]"
    assert allowance.fit("more") == ""
    assert cap_text("abcdefg" + crossing) == ("abcdefg" + crossing, False)  # kept as streamed
    # A token that replaces the text (is_sequence) starts the count again.
    assert allowance.fit("0123", replace=True) == "0123"
    assert allowance.fit("45") == "45"


def test_the_default_step_budget_holds_the_longest_message_a_user_may_send(settings):
    assert 4 * settings.MAX_MESSAGE_CHARS <= settings.STEP_MAX_BYTES
    assert step_budgets.text_bytes("\U0001f600" * settings.MAX_MESSAGE_CHARS) <= settings.STEP_MAX_BYTES
