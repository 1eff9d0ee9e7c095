"""Reads of a transcript within byte budgets: history pages (forwards and, scrolling up,
backwards), bootstrap, the ThreadDict of ``resume_thread`` and the rebuilt chat context. A
walk over the pages sees every step once, in ``seq`` order, whatever the budgets cut."""

import json
import uuid
from urllib.parse import urlencode

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from threads_app.models import Step, Thread
from threads_app.selectors import (
    OMITTED_KEY,
    context_step_dicts,
    engine_conversation,
    newest_steps,
    resume_thread_dict,
)
from threads_app.services import ensure_thread, upsert_step
from threads_app.transcript_budgets import wire_bytes, wire_bytes_of_page

pytestmark = pytest.mark.django_db

STEPS = 60


def api_for(user) -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return api


@pytest.fixture
def thread(user) -> Thread:
    """60 steps of uneven sizes (1 to 3 KB), so byte budgets cut pages at varying counts."""
    made, _ = ensure_thread(user, uuid.uuid4(), name="long")
    for i in range(STEPS):
        kind = "user_message" if i % 2 == 0 else "assistant_message"
        upsert_step(made.pk, uuid.uuid4(), type=kind, output=f"{i}:" + "w" * (1000 * (1 + i % 3)))
    return made


def walk_back(api: APIClient, thread: Thread, first: str) -> tuple[list[int], int]:
    """Follow ``previous`` from ``first``; the seqs read (oldest first) and the pages."""
    pages: list[list[int]] = []
    url: str | None = first
    while url:
        body = api.get(url).json()
        pages.insert(0, [step["seq"] for step in body["results"]])
        assert body["next"] is None
        url = body["previous"]
    return [seq for page in pages for seq in page], len(pages)


def test_scrolling_up_reads_every_older_step_once_in_order(settings, user, thread):
    settings.READ_PAGE_MAX_BYTES = 12_000
    api = api_for(user)
    first = f"/api/threads/{thread.pk}/history/?" + urlencode({"before_seq": STEPS + 1, "limit": 7})
    seqs, pages = walk_back(api, thread, first)
    assert seqs == list(range(1, STEPS + 1))
    assert pages > STEPS // 7  # the byte budget cut some pages below the limit


def test_a_page_backwards_is_the_newest_steps_before_the_cursor(user, thread):
    api = api_for(user)
    body = api.get(f"/api/threads/{thread.pk}/history/?before_seq=31&limit=5").json()
    assert [s["seq"] for s in body["results"]] == [26, 27, 28, 29, 30]
    assert "before_seq=26" in body["previous"] and "limit=5" in body["previous"]
    start = api.get(f"/api/threads/{thread.pk}/history/?before_seq=3&limit=5").json()
    assert [s["seq"] for s in start["results"]] == [1, 2] and start["previous"] is None


def test_forward_pages_stop_at_the_byte_budget_and_next_goes_on(settings, user, thread):
    settings.READ_PAGE_MAX_BYTES = 20_000
    api = api_for(user)
    url: str | None = f"/api/threads/{thread.pk}/history/?after_seq=0&limit=500"
    seen: list[int] = []
    pages = 0
    while url:
        body = api.get(url).json()
        assert len(json.dumps(body["results"], separators=(",", ":"))) <= 20_000
        seen += [step["seq"] for step in body["results"]]
        url, pages = body["next"], pages + 1
    assert seen == list(range(1, STEPS + 1)) and pages > 1


def test_before_and_after_together_are_refused(user, thread):
    response = api_for(user).get(f"/api/threads/{thread.pk}/history/?before_seq=5&after_seq=1")
    assert response.status_code == 400 and "before_seq" in response.json()


def test_another_users_thread_is_404_for_older_pages_and_bootstrap(other_user, thread):
    api = api_for(other_user)
    assert api.get(f"/api/threads/{thread.pk}/history/?before_seq=10").status_code == 404
    assert api.get(f"/api/threads/{thread.pk}/bootstrap/").status_code == 404
    assert resume_thread_dict(other_user, thread.pk) is None


def test_bootstrap_carries_the_newest_steps_that_fit_and_says_where_it_stopped(settings, user, thread):
    settings.READ_PAGE_MAX_BYTES = 15_000
    api = api_for(user)
    body = api.get(f"/api/threads/{thread.pk}/bootstrap/").json()
    seqs = [step["seq"] for step in body["entries"]]
    assert seqs == list(range(seqs[0], STEPS + 1)) and seqs[0] > 1
    assert body[OMITTED_KEY] == seqs[0]
    assert sum(wire_bytes(step) for step in body["entries"]) <= 15_000
    # What it left out is read backwards from there, each step once.
    older, _pages = walk_back(api, thread, f"/api/threads/{thread.pk}/history/?before_seq={seqs[0]}")
    assert older + seqs == list(range(1, STEPS + 1))


def test_a_small_thread_bootstraps_whole(user):
    small, _ = ensure_thread(user, uuid.uuid4(), name="short")
    upsert_step(small.pk, uuid.uuid4(), type="user_message", output="hi")
    body = api_for(user).get(f"/api/threads/{small.pk}/bootstrap/").json()
    assert [s["output"] for s in body["entries"]] == ["hi"] and body[OMITTED_KEY] is None


def test_resume_carries_what_fits_the_frame_budget_or_the_page_asked_for(settings, user, thread):
    settings.RESUME_MAX_BYTES = 30_000
    whole = resume_thread_dict(user, thread.pk)
    assert whole is not None
    assert len(json.dumps(["resume_thread", whole], separators=(",", ":"))) <= 30_000
    seqs = [step["seq"] for step in whole["steps"]]
    assert seqs == list(range(seqs[0], STEPS + 1)) and whole[OMITTED_KEY] == seqs[0] > 1

    settings.RESUME_MAX_BYTES = 8 * 1024 * 1024
    page = resume_thread_dict(user, thread.pk, limit=10)
    assert page is not None
    assert [step["seq"] for step in page["steps"]] == list(range(STEPS - 9, STEPS + 1))
    assert page[OMITTED_KEY] == STEPS - 9
    everything = resume_thread_dict(user, thread.pk)
    assert everything is not None and len(everything["steps"]) == STEPS and everything[OMITTED_KEY] is None


def test_non_ascii_text_is_measured_as_the_socket_sends_it(settings, user):
    """python-socketio escapes non-ASCII characters (6 bytes for a 2-byte "é")."""
    settings.RESUME_MAX_BYTES = 20_000
    made, _ = ensure_thread(user, uuid.uuid4(), name="accents")
    for _ in range(10):
        upsert_step(made.pk, uuid.uuid4(), type="assistant_message", output="é" * 1000)
    resumed = resume_thread_dict(user, made.pk)
    assert resumed is not None
    assert len(json.dumps(resumed, separators=(",", ":"))) <= 20_000
    assert len(resumed["steps"]) == 3  # over 6 KB each once encoded: 3 of the 10 fit


def test_one_step_larger_than_a_whole_budget_is_shown_cut(settings, user):
    """Rows written before the step budget existed can be larger than a read's budget."""
    made, _ = ensure_thread(user, uuid.uuid4(), name="legacy")
    upsert_step(made.pk, uuid.uuid4(), type="assistant_message", output="old")
    big = upsert_step(made.pk, uuid.uuid4(), type="assistant_message", output="")
    Step.objects.filter(pk=big.pk).update(output="B" * 100_000)  # past the write path's budget
    steps, omitted = newest_steps(made.pk, max_bytes=10_000)
    assert [s["output"][:3] for s in steps] == ["old", "BBB"] and omitted is None
    assert len(steps[1]["output"]) < 10_000 and "[truncated" in steps[1]["output"]


def test_the_chat_context_is_rebuilt_from_the_newest_text_within_its_budget(settings, user, thread):
    settings.CHAT_CONTEXT_MAX_BYTES = 10_000
    steps = context_step_dicts(thread.pk)
    assert sum(len(s["output"]) for s in steps) <= 10_000
    assert [s["seq"] for s in steps] == list(range(STEPS - len(steps) + 1, STEPS + 1))


def test_an_engine_resuming_a_long_thread_replays_its_newest_messages(settings, user, thread):
    settings.CHAT_CONTEXT_MAX_BYTES = 10_000
    Thread.objects.filter(pk=thread.pk).update(engine_session_id="conv-long")
    replay = engine_conversation("conv-long")
    assert 0 < sum(len(m["output"]) for m in replay) <= 10_000
    assert replay[-1]["output"].startswith(f"{STEPS - 1}:")


def test_a_page_measured_at_once_weighs_what_its_steps_weigh_one_by_one(user, thread):
    steps, _omitted = newest_steps(thread.pk, max_bytes=10**9)
    steps[0]["output"] = 'é "quoted" \\ and \x01'  # escapes of every kind
    assert wire_bytes_of_page(steps) == sum(wire_bytes(step) for step in steps)
    assert wire_bytes_of_page([]) == 0
