"""Chainlit's file upload (tied to a session of the caller's, as Chainlit ties it to the socket
session) and read, and its feedback endpoints, in Chainlit's payloads and answers."""

import uuid
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client, override_settings

from media_app.models import Upload
from sessions_app.models import SocketSession
from tests.chainlit_compat.helpers import P, browser_of, thread_with_reply
from tests.media_app.photos import photo
from threads_app.models import Feedback
from threads_app.services import upsert_step

pytestmark = pytest.mark.django_db(transaction=True)


def session_of(user) -> str:
    return str(SocketSession.objects.create(id=uuid.uuid4(), user=user, thread_id=uuid.uuid4()).pk)


def upload(client: Client, session_id: str, data: bytes, name: str = "cat.jpg", mime: str = "image/jpeg"):
    return client.post(
        f"{P}/project/file?session_id={session_id}",
        {"file": SimpleUploadedFile(name, data, content_type=mime)},
    )


def test_an_upload_answers_200_with_the_id_the_message_refers_to(user):
    client = browser_of(user)
    session_id = session_of(user)
    data = photo()
    response = upload(client, session_id, data)
    assert response.status_code == 200, response.content
    body = response.json()
    stored = Upload.objects.get(pk=body["id"])
    assert (stored.owner_id, stored.content_type, stored.size) == (user.pk, "image/jpeg", len(data))
    read = client.get(f"{P}/project/file/{body['id']}", {"session_id": session_id})
    assert read.status_code == 200
    assert read.content == data and read["Content-Type"] == "image/jpeg"
    assert read["X-Content-Type-Options"] == "nosniff" and read["Content-Security-Policy"] == "sandbox"


def test_uploads_need_a_live_session_of_the_callers(user, other_user):
    client = browser_of(user)
    theirs = session_of(other_user)
    for session_id in (theirs, str(uuid.uuid4()), "nope"):
        response = upload(client, session_id, photo())
        assert response.status_code == 404, response.content
    ended = SocketSession.objects.create(id=uuid.uuid4(), user=user, thread_id=uuid.uuid4(), ended=True)
    assert upload(client, str(ended.pk), photo()).status_code == 404
    assert Upload.objects.count() == 0


def test_a_file_is_read_only_by_its_owner_in_a_session_of_theirs(user, other_user):
    client = browser_of(user)
    session_id = session_of(user)
    file_id = upload(client, session_id, photo()).json()["id"]
    intruder = browser_of(other_user)
    assert (
        intruder.get(f"{P}/project/file/{file_id}", {"session_id": session_of(other_user)}).status_code == 404
    )
    assert intruder.get(f"{P}/project/file/{file_id}", {"session_id": session_id}).status_code == 404
    assert client.get(f"{P}/project/file/{uuid.uuid4()}", {"session_id": session_id}).status_code == 404
    assert client.get(f"{P}/project/file/{file_id}").status_code == 404


def test_a_refused_file_is_a_400_and_another_origin_a_403(user):
    client = browser_of(user)
    session_id = session_of(user)
    refused = upload(client, session_id, b"<html><script>x</script>", name="x.html", mime="text/html")
    assert refused.status_code == 400, refused.content
    client.defaults["HTTP_ORIGIN"] = "http://evil.example"
    assert upload(client, session_id, photo()).status_code == 403
    assert Upload.objects.count() == 0


@override_settings(REST_FRAMEWORK={"DEFAULT_THROTTLE_RATES": {"uploads": "2/min"}})
def test_uploads_spend_the_upload_budget(user):
    client = browser_of(user)
    session_id = session_of(user)
    assert [upload(client, session_id, photo()).status_code for _ in range(3)] == [200, 200, 429]


def test_feedback_at_chainlits_path_in_chainlits_payload(user, other_user):
    thread, _, answer = thread_with_reply(user)
    client = browser_of(user)
    body = {
        "feedback": {"forId": str(answer.pk), "value": 1, "comment": "good", "threadId": str(thread.pk)},
        "sessionId": str(uuid.uuid4()),
    }
    given = client.put(f"{P}/feedback", body, content_type="application/json")
    assert given.status_code == 200, given.content
    assert set(given.json()) == {"success", "feedbackId"}
    stored = Feedback.objects.get()
    assert (str(stored.pk), stored.value, stored.comment) == (given.json()["feedbackId"], 1, "good")
    foreign = browser_of(other_user).put(f"{P}/feedback", body, content_type="application/json")
    assert foreign.status_code == 404
    assert (
        browser_of(other_user)
        .delete(f"{P}/feedback", {"feedbackId": str(stored.pk)}, content_type="application/json")
        .status_code
        == 404
    )
    client.defaults["HTTP_ORIGIN"] = "http://evil.example"
    assert (
        client.delete(
            f"{P}/feedback", {"feedbackId": str(stored.pk)}, content_type="application/json"
        ).status_code
        == 403
    )
    client.defaults["HTTP_ORIGIN"] = "http://testserver"
    removed = client.delete(f"{P}/feedback", {"feedbackId": str(stored.pk)}, content_type="application/json")
    assert removed.status_code == 200 and removed.json() == {"success": True}
    assert Feedback.objects.count() == 0


def run_of(thread_dict: dict[str, Any]) -> dict[str, Any]:
    runs: list[dict[str, Any]] = [s for s in thread_dict["steps"] if s["type"] == "run"]
    assert len(runs) == 1, thread_dict["steps"]
    return runs[0]


def test_a_threads_turn_reads_inside_its_run_whose_feedback_is_stored_on_the_reply(user, other_user):
    """Chainlit's frontend rates runs (the thumbs sit on a run's last reply): the thread read
    nests the turn in a run after its user message, a thumbs up on the run's id is stored on
    the reply, and the next read shows it on the run."""
    thread, asked, answer = thread_with_reply(user)
    client = browser_of(user)
    read = client.get(f"{P}/project/thread/{thread.pk}").json()
    run = run_of(read)
    steps = {s["id"]: s for s in read["steps"]}
    assert (run["name"], run["parentId"], bool(run["end"])) == ("on_message", str(asked.pk), True), run
    assert steps[str(answer.pk)]["parentId"] == run["id"], read["steps"]
    assert steps[str(asked.pk)]["parentId"] is None and "feedback" not in run
    body = {"feedback": {"forId": run["id"], "value": 1, "threadId": str(thread.pk)}, "sessionId": ""}
    assert (
        browser_of(other_user).put(f"{P}/feedback", body, content_type="application/json").status_code == 404
    )
    given = client.put(f"{P}/feedback", body, content_type="application/json")
    assert given.status_code == 200, given.content
    stored = Feedback.objects.get()
    assert (stored.step_id, stored.value, str(stored.pk)) == (answer.pk, 1, given.json()["feedbackId"])
    again = run_of(client.get(f"{P}/project/thread/{thread.pk}").json())
    assert again["feedback"]["value"] == 1 and again["feedback"]["id"] == given.json()["feedbackId"], again


def test_a_run_with_no_reply_and_a_made_up_id_are_not_found(user):
    thread, _, _ = thread_with_reply(user)
    upsert_step(thread.pk, uuid.uuid4(), type="user_message", name="user", output="unanswered")
    client = browser_of(user)
    runs = [s for s in client.get(f"{P}/project/thread/{thread.pk}").json()["steps"] if s["type"] == "run"]
    assert len(runs) == 2, runs
    for for_id in (runs[1]["id"], str(uuid.uuid4())):
        body = {"feedback": {"forId": for_id, "value": 0, "threadId": str(thread.pk)}}
        answered = client.put(f"{P}/feedback", body, content_type="application/json")
        assert answered.status_code == 404, (for_id, answered.content)
    assert Feedback.objects.count() == 0
