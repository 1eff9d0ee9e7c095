"""Transcript reads carry the reader's feedback on each rated step (Chainlit's ``feedback``
key: ``{id, forId, value, comment}``), absent on the others, for the history pages, the
bootstrap and the ThreadDict a resume sends; and they cost no query per step."""

import uuid
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from threads_app.feedback import Change, FeedbackNotFound, give_feedback, remove_feedback
from threads_app.models import Feedback, Step, Thread
from threads_app.selectors import owned_thread_dict
from threads_app.services import ensure_thread, upsert_step

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def replies(owner, count: int) -> tuple[Thread, list[Step]]:
    thread, _ = ensure_thread(owner, uuid.uuid4(), name="chat")
    steps = [
        upsert_step(thread.pk, uuid.uuid4(), type="assistant_message", name="assistant", output=f"reply {i}")
        for i in range(count)
    ]
    return thread, steps


def feedback_by_step(steps: list[dict[str, Any]]) -> dict[str, Any]:
    return {s["id"]: s.get("feedback") for s in steps}


def test_history_pages_carry_each_rated_steps_feedback_and_nothing_on_the_rest(api, user):
    thread, steps = replies(user, 5)
    up = give_feedback(user, steps[0].pk, value=1).feedback
    down = give_feedback(user, steps[3].pk, value=0, comment="Off topic").feedback
    seen: dict[str, Any] = {}
    url: str | None = f"/api/threads/{thread.pk}/history/?limit=2"
    while url:
        page = api.get(url).json()
        seen.update(feedback_by_step(page["results"]))
        url = page["next"]
    assert seen == {
        str(steps[0].pk): {"id": str(up.pk), "forId": str(steps[0].pk), "value": 1, "comment": None},
        str(steps[1].pk): None,
        str(steps[2].pk): None,
        str(steps[3].pk): {"id": str(down.pk), "forId": str(steps[3].pk), "value": 0, "comment": "Off topic"},
        str(steps[4].pk): None,
    }


def test_bootstrap_and_the_resumed_thread_carry_feedback(api, user):
    thread, steps = replies(user, 3)
    given = give_feedback(user, steps[2].pk, value=0, comment="Too long").feedback
    expected = {"id": str(given.pk), "forId": str(steps[2].pk), "value": 0, "comment": "Too long"}
    entries = api.get(f"/api/threads/{thread.pk}/bootstrap/").json()["entries"]
    assert feedback_by_step(entries)[str(steps[2].pk)] == expected
    last = api.get(f"/api/threads/{thread.pk}/bootstrap/?limit=1").json()["entries"]
    assert [s.get("feedback") for s in last] == [expected]
    resumed = owned_thread_dict(user, thread.pk)
    assert resumed is not None
    assert feedback_by_step(resumed["steps"]) == {
        str(steps[0].pk): None,
        str(steps[1].pk): None,
        str(steps[2].pk): expected,
    }


def test_only_the_readers_own_feedback_is_shown(user, other_user):
    """A row by someone else on the owner's step (written directly: the API never makes one)
    is not the reader's and does not show, nor doubles the step."""
    thread, steps = replies(user, 1)
    Feedback.objects.create(step=steps[0], thread=thread, user=other_user, value=1, comment="not yours")
    resumed = owned_thread_dict(user, thread.pk)
    assert resumed is not None
    assert [s.get("feedback") for s in resumed["steps"]] == [None]
    mine = give_feedback(user, steps[0].pk, value=0).feedback
    resumed = owned_thread_dict(user, thread.pk)
    assert resumed is not None
    assert [s["feedback"]["id"] for s in resumed["steps"]] == [str(mine.pk)]


@pytest.mark.parametrize("read", ["history", "bootstrap"])
def test_a_read_takes_as_many_queries_for_a_hundred_rated_steps_as_for_fifty(api, user, read):
    """Feedback is joined, never read per step. (A read fetches its steps in keyset pages of
    16, 32, 64... rows, so one step and fifty differ by pages, not by steps.)"""

    def queries(count: int) -> int:
        thread, steps = replies(user, count)
        for step in steps:
            give_feedback(user, step.pk, value=1, comment="ok")
        with CaptureQueriesContext(connection) as captured:
            body = api.get(f"/api/threads/{thread.pk}/{read}/").json()
        rated = body["results"] if read == "history" else body["entries"]
        assert [s["feedback"]["value"] for s in rated] == [1] * count
        return len(captured)

    assert queries(100) == queries(50)


def test_resume_reads_feedback_in_the_same_statement_as_the_steps(user):
    thread, steps = replies(user, 20)
    for step in steps:
        give_feedback(user, step.pk, value=0)
    with CaptureQueriesContext(connection) as rated:
        owned_thread_dict(user, thread.pk)
    plain, _ = replies(user, 20)
    with CaptureQueriesContext(connection) as unrated:
        owned_thread_dict(user, plain.pk)
    # The thread, then its steps joined with feedback, then its elements (media_app's).
    assert len(rated) == len(unrated) == 3


def test_the_services_report_what_changed_and_refuse_what_is_not_the_users(user, other_user):
    _, [step] = replies(user, 1)
    assert give_feedback(user, step.pk, value=1).change is Change.CREATED
    assert give_feedback(user, step.pk, value=1).change is Change.UNCHANGED
    assert give_feedback(user, step.pk, value=1, comment="x").change is Change.CHANGED
    with pytest.raises(FeedbackNotFound):
        give_feedback(other_user, step.pk, value=1)
    with pytest.raises(ValueError):
        give_feedback(user, step.pk, value=2)
    feedback = Feedback.objects.get()
    with pytest.raises(FeedbackNotFound):
        remove_feedback(other_user, feedback.pk)
    remove_feedback(user, feedback.pk)
    assert not Feedback.objects.exists()
