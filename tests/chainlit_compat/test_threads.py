"""Chainlit's thread endpoints (the sidebar's list, a thread's read, rename, delete, an
element), in Chainlit's payloads and response shapes, owner-checked."""

import time
import uuid

import pytest
from django.test import Client, override_settings

from media_app.elements import create_element
from tests.chainlit_compat.helpers import P, browser_of, thread_with_reply
from threads_app.models import Feedback, Thread

pytestmark = pytest.mark.django_db(transaction=True)


def list_threads(client: Client, first: int = 20, cursor=None, **filters):
    body = {"pagination": {"first": first, "cursor": cursor}, "filter": filters}
    return client.post(f"{P}/project/threads", body, content_type="application/json")


def test_the_list_pages_newest_first_with_chainlits_page_info(user, other_user):
    made = []
    for i in range(5):
        made.append(thread_with_reply(user, name=f"chat {i}")[0])
        time.sleep(0.002)  # distinct updated_at
    thread_with_reply(other_user, name="not yours")
    client = browser_of(user)
    first = list_threads(client, first=2)
    assert first.status_code == 200, first.content
    body = first.json()
    assert set(body) == {"pageInfo", "data"}
    assert [t["name"] for t in body["data"]] == ["chat 4", "chat 3"]
    assert body["pageInfo"] == {
        "hasNextPage": True,
        "startCursor": str(made[4].pk),
        "endCursor": str(made[3].pk),
    }
    assert {
        "id",
        "createdAt",
        "name",
        "userId",
        "userIdentifier",
        "tags",
        "metadata",
        "steps",
        "elements",
    } <= set(body["data"][0])
    names = [t["name"] for t in body["data"]]
    cursor = body["pageInfo"]["endCursor"]
    while cursor:
        page = list_threads(client, first=2, cursor=cursor).json()
        names += [t["name"] for t in page["data"]]
        cursor = page["pageInfo"]["endCursor"] if page["pageInfo"]["hasNextPage"] else None
    assert names == [f"chat {i}" for i in (4, 3, 2, 1, 0)]


def test_a_cursor_deleted_meanwhile_still_marks_its_place(user):
    made = []
    for i in range(3):
        made.append(thread_with_reply(user, name=f"chat {i}")[0])
        time.sleep(0.002)
    client = browser_of(user)
    page = list_threads(client, first=1).json()
    assert client.delete(
        f"{P}/project/thread", {"threadId": page["pageInfo"]["endCursor"]}, content_type="application/json"
    ).json() == {"success": True}
    rest = list_threads(client, first=5, cursor=page["pageInfo"]["endCursor"]).json()
    assert [t["name"] for t in rest["data"]] == ["chat 1", "chat 0"]
    assert rest["pageInfo"]["hasNextPage"] is False


def test_another_users_cursor_lists_nothing(user, other_user):
    foreign, _, _ = thread_with_reply(other_user)
    thread_with_reply(user)
    page = list_threads(browser_of(user), cursor=str(foreign.pk)).json()
    assert page["data"] == [] and page["pageInfo"]["hasNextPage"] is False


def test_search_and_feedback_filters(user):
    kept, _, answer = thread_with_reply(user, name="weather", text="sunny tomorrow")
    other, _, _ = thread_with_reply(user, name="recipes", text="add salt")
    Feedback.objects.create(step=answer, thread=kept, user=user, value=1)
    client = browser_of(user)
    assert [t["id"] for t in list_threads(client, search="salt").json()["data"]] == [str(other.pk)]
    assert [t["id"] for t in list_threads(client, feedback=1).json()["data"]] == [str(kept.pk)]
    assert list_threads(client, feedback=0).json()["data"] == []
    # userId is Chainlit's and ignored: the caller's threads only.
    assert len(list_threads(client, userId="someone-else").json()["data"]) == 2


@override_settings(REST_FRAMEWORK={"DEFAULT_THROTTLE_RATES": {"searches": "2/min"}})
def test_searches_spend_the_search_budget_a_plain_list_does_not(user):
    client = browser_of(user)
    for _ in range(5):
        assert list_threads(client).status_code == 200
    assert list_threads(client, search="a").status_code == 200
    assert list_threads(client, search="b").status_code == 200
    refused = list_threads(client, search="c")
    assert refused.status_code == 429, refused.content
    assert list_threads(client).status_code == 200


def test_a_bad_payload_is_a_400(user):
    client = browser_of(user)
    assert (
        client.post(f"{P}/project/threads", {"filter": {}}, content_type="application/json").status_code
        == 400
    )
    assert list_threads(client, search="x" * 201).status_code == 400
    assert list_threads(client, cursor="not-a-uuid").status_code == 400


def test_signed_out_is_a_401():
    assert list_threads(Client()).status_code == 401
    assert Client().get(f"{P}/project/thread/{uuid.uuid4()}").status_code == 401


def test_read_a_thread_with_its_steps(user, other_user):
    thread, asked, answer = thread_with_reply(user)
    client = browser_of(user)
    response = client.get(f"{P}/project/thread/{thread.pk}")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["id"] == str(thread.pk) and body["userIdentifier"] == "owner"
    # The turn reads inside its run, as Chainlit's on_message is (``chainlit_runs``).
    steps = body["steps"]
    assert [s["type"] for s in steps] == ["user_message", "run", "assistant_message"], steps
    assert [steps[0]["id"], steps[2]["id"]] == [str(asked.pk), str(answer.pk)]
    assert steps[2]["output"] == "an answer" and steps[2]["parentId"] == steps[1]["id"]
    for foreign in (thread_with_reply(other_user)[0].pk, uuid.uuid4(), "not-a-uuid"):
        assert client.get(f"{P}/project/thread/{foreign}").status_code == 404


def test_rename_and_delete_are_owner_checked(user, other_user):
    mine, _, _ = thread_with_reply(user)
    theirs, _, _ = thread_with_reply(other_user, name="theirs")
    client = browser_of(user)
    put = client.put(
        f"{P}/project/thread", {"threadId": str(mine.pk), "name": "renamed"}, content_type="application/json"
    )
    assert put.status_code == 200 and put.json() == {"success": True}
    assert Thread.objects.get(pk=mine.pk).name == "renamed"
    for body in ({"threadId": str(theirs.pk), "name": "x"}, {"threadId": "nope", "name": "x"}):
        assert client.put(f"{P}/project/thread", body, content_type="application/json").status_code == 404
    assert (
        client.delete(
            f"{P}/project/thread", {"threadId": str(theirs.pk)}, content_type="application/json"
        ).status_code
        == 404
    )
    assert (
        Thread.objects.get(pk=theirs.pk).name == "theirs"
        and Thread.objects.get(pk=theirs.pk).deleted_at is None
    )
    assert (
        client.put(
            f"{P}/project/thread", {"threadId": str(mine.pk), "name": ""}, content_type="application/json"
        ).status_code
        == 400
    )
    assert client.delete(
        f"{P}/project/thread", {"threadId": str(mine.pk)}, content_type="application/json"
    ).json() == {"success": True}
    assert client.get(f"{P}/project/thread/{mine.pk}").status_code == 404
    assert list_threads(client).json()["data"] == []


def test_another_sites_page_cannot_rename_or_delete(user):
    mine, _, _ = thread_with_reply(user)
    client = browser_of(user)
    client.defaults["HTTP_ORIGIN"] = "http://evil.example"
    body = {"threadId": str(mine.pk), "name": "pwned"}
    assert client.put(f"{P}/project/thread", body, content_type="application/json").status_code == 403
    assert client.delete(f"{P}/project/thread", body, content_type="application/json").status_code == 403
    assert list_threads(client).status_code == 403
    client.defaults["HTTP_ORIGIN"] = "null"
    assert client.put(f"{P}/project/thread", body, content_type="application/json").status_code == 403
    assert Thread.objects.get(pk=mine.pk).name == "chat" and Thread.objects.get(pk=mine.pk).deleted_at is None


@override_settings(CSRF_TRUSTED_ORIGINS=["https://chat.example"])
def test_a_trusted_origin_may(user):
    mine, _, _ = thread_with_reply(user)
    client = browser_of(user)
    client.defaults["HTTP_ORIGIN"] = "https://chat.example"
    body = {"threadId": str(mine.pk), "name": "from the trusted origin"}
    assert client.put(f"{P}/project/thread", body, content_type="application/json").status_code == 200


def test_an_element_of_the_callers_thread(user, other_user):
    thread, _, answer = thread_with_reply(user)
    element = create_element(
        owner_id=user.pk,
        thread_id=thread.pk,
        element_id=uuid.uuid4(),
        type="text",
        name="notes.txt",
        for_id=answer.pk,
        data=b"some notes",
        mime="text/plain",
    )
    client = browser_of(user)
    response = client.get(f"{P}/project/thread/{thread.pk}/element/{element.pk}")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["id"], body["threadId"], body["forId"], body["name"], body["type"]) == (
        str(element.pk),
        str(thread.pk),
        str(answer.pk),
        "notes.txt",
        "text",
    )
    other_thread, _, _ = thread_with_reply(user)
    assert client.get(f"{P}/project/thread/{other_thread.pk}/element/{element.pk}").status_code == 404
    assert (
        browser_of(other_user).get(f"{P}/project/thread/{thread.pk}/element/{element.pk}").status_code == 404
    )
    assert client.get(f"{P}/project/thread/{thread.pk}/element/nope").status_code == 404
