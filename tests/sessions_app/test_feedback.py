"""Feedback on assistant messages through its public surface: ``PUT`` / ``DELETE /api/feedback``
(Chainlit's payloads), the app's ``@chat.on_feedback`` hook, and the ``resume_thread`` a
reopened thread sends, for both kinds of app (hooks API and engine runtime).

One feedback per user and message, changeable and removable; another user's ids, a deleted
thread's and unknown ones are 404, malformed ones 400.
"""

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from chatproject.asgi import http_app
from tests.apps import feedback_recorder
from tests.support.client import session_cookie
from tests.support.concurrency import run_in_threads
from tests.support.wire import in_process_socket, new_auth
from threads_app.models import FEEDBACK_COMMENT_MAX, Feedback, Step, Thread
from threads_app.services import ensure_thread, soft_delete_thread, upsert_step

pytestmark = pytest.mark.django_db(transaction=True)

URL = "/api/feedback"
APPS = ["tests.apps.feedback_app", "tests.apps.feedback_engine_app"]


@pytest.fixture(params=APPS)
def app(request, settings) -> Iterator[str]:
    """Each test runs with a hooks-API app and with an engine-runtime app, both recording
    their on_feedback calls."""
    settings.CHAT_APP = request.param
    feedback_recorder.CALLS.clear()
    yield request.param
    feedback_recorder.CALLS.clear()


def client_of(user) -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return api


@pytest.fixture
def api(user) -> APIClient:
    return client_of(user)


def thread_with_reply(owner, text: str = "an answer") -> tuple[Thread, Step, Step]:
    """A thread of ``owner`` with a user message and the assistant's reply to it."""
    thread, _ = ensure_thread(owner, uuid.uuid4(), name="chat")
    asked = upsert_step(thread.pk, uuid.uuid4(), type="user_message", name="user", output="a question")
    answer = upsert_step(thread.pk, uuid.uuid4(), type="assistant_message", name="assistant", output=text)
    return thread, asked, answer


def put(api: APIClient, for_id: Any, value: Any = 1, **fields: Any) -> Any:
    return api.put(URL, {"feedback": {"forId": str(for_id), "value": value, **fields}}, format="json")


def delete(api: APIClient, feedback_id: Any) -> Any:
    return api.delete(URL, {"feedbackId": str(feedback_id)}, format="json")


def history(api: APIClient, thread: Thread) -> list[dict[str, Any]]:
    response = api.get(f"/api/threads/{thread.pk}/history/")
    assert response.status_code == 200
    results: list[dict[str, Any]] = response.json()["results"]
    return results


def calls() -> list[tuple[str, int, str | None]]:
    return [(c.forId, c.value, c.comment) for c in feedback_recorder.CALLS]


# --- give, change, remove -------------------------------------------------------------------


def test_thumbs_down_with_a_comment_is_stored_and_shown_on_the_step(app, api, user):
    thread, asked, answer = thread_with_reply(user)
    response = put(api, answer.pk, 0, comment="Wrong year.", threadId=str(thread.pk))
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {"success", "feedbackId"} and body["success"] is True
    stored = Feedback.objects.get()
    assert str(stored.pk) == body["feedbackId"]
    assert (stored.step_id, stored.thread_id, stored.user_id) == (answer.pk, thread.pk, user.pk)
    assert (stored.value, stored.comment) == (0, "Wrong year.")

    steps = {s["id"]: s for s in history(api, thread)}
    assert steps[str(answer.pk)]["feedback"] == {
        "id": body["feedbackId"],
        "forId": str(answer.pk),
        "value": 0,
        "comment": "Wrong year.",
    }
    assert "feedback" not in steps[str(asked.pk)]
    assert calls() == [(str(answer.pk), 0, "Wrong year.")]
    [call] = feedback_recorder.CALLS
    assert (call.id, call.threadId, call.userIdentifier) == (
        body["feedbackId"],
        str(thread.pk),
        user.username,
    )


def test_changing_feedback_keeps_one_row_and_its_id_and_runs_the_hook_once_per_change(app, api, user):
    _, _, answer = thread_with_reply(user)
    first = put(api, answer.pk, 1).json()["feedbackId"]
    assert put(api, answer.pk, 0, comment="on second thought").json()["feedbackId"] == first
    assert put(api, answer.pk, 0, comment="on second thought").json()["feedbackId"] == first  # a resend
    assert put(api, answer.pk, 0).json()["feedbackId"] == first  # the comment taken out
    assert Feedback.objects.count() == 1
    assert (Feedback.objects.get().value, Feedback.objects.get().comment) == (0, "")
    assert calls() == [
        (str(answer.pk), 1, None),
        (str(answer.pk), 0, "on second thought"),
        (str(answer.pk), 0, None),
    ]


def test_removed_feedback_is_gone_from_the_history_and_can_be_given_again(app, api, user):
    thread, _, answer = thread_with_reply(user)
    feedback_id = put(api, answer.pk, 1, comment="nice").json()["feedbackId"]
    response = delete(api, feedback_id)
    assert response.status_code == 200 and response.json() == {"success": True}
    assert not Feedback.objects.exists()
    assert all("feedback" not in step for step in history(api, thread))
    assert delete(api, feedback_id).status_code == 404  # already gone
    assert calls() == [(str(answer.pk), 1, "nice")]  # taking it back is not announced

    again = put(api, answer.pk, 0).json()["feedbackId"]
    assert again != feedback_id
    assert calls()[-1] == (str(answer.pk), 0, None)


def test_a_failing_hook_loses_no_feedback(app, api, user, caplog):
    thread, _, answer = thread_with_reply(user)
    response = put(api, answer.pk, 0, comment=feedback_recorder.FAIL)
    assert response.status_code == 200
    assert Feedback.objects.get().comment == feedback_recorder.FAIL
    assert history(api, thread)[1]["feedback"]["comment"] == feedback_recorder.FAIL
    assert len(feedback_recorder.CALLS) == 1
    assert "on_feedback hook failed" in caplog.text


def test_each_user_rates_only_their_own_messages_one_feedback_each(app, django_user_model):
    """Two users, each with a thread: each one's feedback lands on their own message only."""
    alice = django_user_model.objects.create_user(username="alice", password="pw-for-tests-1")
    bob = django_user_model.objects.create_user(username="bob", password="pw-for-tests-1")
    _, _, alices = thread_with_reply(alice)
    _, _, bobs = thread_with_reply(bob)
    assert put(client_of(alice), alices.pk, 1).status_code == 200
    assert put(client_of(bob), bobs.pk, 0).status_code == 200
    assert sorted(Feedback.objects.values_list("user__username", "value")) == [("alice", 1), ("bob", 0)]


def test_concurrent_gives_for_one_message_end_in_one_row_holding_one_of_them(app, user):
    _, _, answer = thread_with_reply(user)
    token = Token.objects.create(user=user).key

    def give(i: int) -> tuple[int, str]:
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Token {token}")
        response = put(api, answer.pk, i % 2, comment=f"try {i}")
        return response.status_code, response.json().get("feedbackId")

    answers = run_in_threads(8, give)
    assert {status for status, _ in answers} == {200}
    assert len({feedback_id for _, feedback_id in answers}) == 1
    stored = Feedback.objects.get()
    assert str(stored.pk) == answers[0][1]
    assert (stored.value, stored.comment) in {(i % 2, f"try {i}") for i in range(8)}
    assert len(feedback_recorder.CALLS) >= 1


# --- refusals -------------------------------------------------------------------------------


def test_another_users_deleted_missing_or_mismatched_targets_are_404(app, api, user, other_user):
    _, _, theirs = thread_with_reply(other_user)
    their_feedback = put(client_of(other_user), theirs.pk, 1).json()["feedbackId"]
    thread, _, mine = thread_with_reply(user)
    other_thread, _, _ = thread_with_reply(user)

    assert put(api, theirs.pk, 1).status_code == 404
    assert put(api, theirs.pk, 1).json() == {"detail": "No such message."}
    assert put(api, uuid.uuid4(), 1).status_code == 404
    assert put(api, mine.pk, 1, threadId=str(other_thread.pk)).status_code == 404
    assert delete(api, their_feedback).status_code == 404
    assert delete(api, uuid.uuid4()).status_code == 404
    assert Feedback.objects.filter(user=user).count() == 0
    assert Feedback.objects.get().comment == ""  # theirs untouched

    my_feedback = put(api, mine.pk, 1).json()["feedbackId"]
    soft_delete_thread(thread)
    assert put(api, mine.pk, 0).status_code == 404
    assert delete(api, my_feedback).status_code == 404
    assert len(feedback_recorder.CALLS) == 2  # theirs and mine, once each


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"feedback": {"forId": "not-a-uuid", "value": 1}}, "forId"),
        ({"feedback": {"forId": str(uuid.uuid4()), "value": 1, "threadId": "nope"}}, "threadId"),
        ({"feedback": {"forId": str(uuid.uuid4()), "value": 2}}, "value"),
        ({"feedback": {"forId": str(uuid.uuid4()), "value": True}}, "value"),
        ({"feedback": {"forId": str(uuid.uuid4()), "value": "1"}}, "value"),
        ({"feedback": {"forId": str(uuid.uuid4())}}, "value"),
        ({"feedback": {"forId": str(uuid.uuid4()), "value": 1, "comment": 5}}, "comment"),
        ({"feedback": {"forId": str(uuid.uuid4()), "value": 1, "comment": "a\x00b"}}, "comment"),
    ],
)
def test_malformed_feedback_is_a_400_naming_the_field(app, api, body, field):
    response = api.put(URL, body, format="json")
    assert response.status_code == 400
    assert field in response.json()["feedback"]
    assert not Feedback.objects.exists()


def test_malformed_bodies_are_400(app, api):
    assert api.put(URL, {"forId": str(uuid.uuid4()), "value": 1}, format="json").status_code == 400
    assert api.put(URL, "[1]", content_type="application/json").status_code == 400
    assert api.put(URL, "{", content_type="application/json").status_code == 400
    response = delete(api, "not-a-uuid")
    assert response.status_code == 400 and "feedbackId" in response.json()
    assert api.delete(URL, {}, format="json").status_code == 400


def test_a_user_message_takes_no_feedback(app, api, user):
    _, asked, _ = thread_with_reply(user)
    response = put(api, asked.pk, 1)
    assert response.status_code == 400
    assert response.json() == {"feedback": {"forId": ["Only assistant messages take feedback."]}}
    assert not Feedback.objects.exists() and feedback_recorder.CALLS == []


def test_a_comment_over_the_limit_is_refused_and_one_at_it_is_kept(app, api, user):
    _, _, answer = thread_with_reply(user)
    response = put(api, answer.pk, 0, comment="x" * (FEEDBACK_COMMENT_MAX + 1))
    assert response.status_code == 400 and "comment" in response.json()["feedback"]
    assert not Feedback.objects.exists()
    assert put(api, answer.pk, 0, comment="é" * FEEDBACK_COMMENT_MAX).status_code == 200
    assert len(Feedback.objects.get().comment) == FEEDBACK_COMMENT_MAX


def test_no_credentials_is_401_and_a_session_without_csrf_is_403(app, user):
    _, _, answer = thread_with_reply(user)
    assert put(APIClient(), answer.pk).status_code == 401
    browser = APIClient(enforce_csrf_checks=True)
    browser.force_login(user)
    assert put(browser, answer.pk).status_code == 403
    assert not Feedback.objects.exists()


async def test_a_body_over_the_request_budget_is_413_before_it_is_read(settings):
    settings.MAX_REQUEST_BODY_BYTES = 1000
    body = json.dumps({"feedback": {"forId": str(uuid.uuid4()), "value": 0, "comment": "x" * 2000}}).encode()
    sent: list[dict[str, Any]] = []
    read_after: int | None = None  # messages sent before the body was first read

    async def receive() -> dict[str, Any]:
        nonlocal read_after
        read_after = len(sent) if read_after is None else read_after
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "PUT",
        "path": URL,
        "query_string": b"",
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
    }
    await http_app(scope, receive, send)
    # The answer is out before a byte is read; the rest is read and dropped only then, so that
    # the connection closes cleanly (chatproject.body_limits.DISCARD_AT_MOST).
    assert sent[0]["status"] == 413 and json.loads(sent[1]["body"])["detail"].startswith(
        "The request body is over"
    )
    assert read_after is None or read_after == 2, read_after


# --- resume ---------------------------------------------------------------------------------


@override_settings(CHANNEL_LAYERS={"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}})
async def test_resume_thread_carries_the_users_feedback_on_each_rated_step(app, make_user):
    user = make_user()
    thread, asked, answer = await sync_to_async(thread_with_reply)(user)
    second = await sync_to_async(upsert_step)(
        thread.pk, uuid.uuid4(), type="assistant_message", name="assistant", output="more"
    )
    api = await sync_to_async(client_of)(user)
    given = (await sync_to_async(put)(api, answer.pk, 0, comment="too long")).json()["feedbackId"]

    async with in_process_socket(await session_cookie(user)) as sock:
        await sock.connect_namespace(new_auth(threadId=str(thread.pk)))
        await sock.send_event("connection_successful")
        [resumed] = await sock.event("resume_thread")
    steps = {s["id"]: s for s in resumed["steps"]}
    assert steps[str(answer.pk)]["feedback"] == {
        "id": given,
        "forId": str(answer.pk),
        "value": 0,
        "comment": "too long",
    }
    assert "feedback" not in steps[str(asked.pk)] and "feedback" not in steps[str(second.pk)]


def test_the_schema_documents_both_operations_and_the_steps_feedback(client):
    schema = client.get("/api/schema/", {"format": "json"}).json()
    operations = schema["paths"]["/api/feedback"]
    assert set(operations) == {"put", "delete"}
    components = schema["components"]["schemas"]
    for method, fields in (("put", {"feedback"}), ("delete", {"feedbackId"})):
        body = operations[method]["requestBody"]["content"]
        assert list(body) == ["application/json"]
        ref = body["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
        assert fields <= set(components[ref]["properties"])
    assert "feedback" in components["Step"]["properties"]
    assert "feedback" not in components["Step"]["required"]


def test_feedback_writes_are_throttled_per_user_and_a_refused_one_changes_nothing(
    api, user, other_user, settings
):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"feedback": "3/min"}}
    _, _, answer = thread_with_reply(user)
    statuses = [put(api, answer.pk, value % 2).status_code for value in range(4)]
    assert statuses == [200, 200, 200, 429]
    assert Feedback.objects.get(step=answer, user=user).value == 0  # the third write's, not the fourth's
    _, _, others = thread_with_reply(other_user)
    assert put(client_of(other_user), others.pk, 1).status_code == 200
