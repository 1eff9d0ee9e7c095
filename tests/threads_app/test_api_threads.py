"""The threads API: listing, reading, renaming, deleting threads and reading transcripts.

Every endpoint answers 404 for a thread that is not the caller's (another user's, deleted,
missing, or not a UUID), and the bodies use Chainlit's ThreadDict / StepDict field names.
"""

import base64
import os
import uuid
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

import pytest
from django.http import HttpRequest
from django.test import override_settings
from django.utils.crypto import get_random_string
from rest_framework.authtoken.models import Token
from rest_framework.response import Response
from rest_framework.test import APIClient, APIRequestFactory
from rest_framework.views import APIView

from threads_app.budgets import SENDS
from threads_app.models import AcceptedMessage, Step, Thread
from threads_app.services import accept_message, ensure_thread, upsert_step
from threads_app.throttling import SendRateThrottle
from threads_app.token_bucket import Rate

pytestmark = pytest.mark.django_db

THREAD_KEYS = {
    "id",
    "createdAt",
    "updatedAt",
    "name",
    "userId",
    "userIdentifier",
    "tags",
    "metadata",
    "steps",
    "elements",
}
# A step read back has Chainlit's StepDict keys; ``content`` only when it holds blocks.
STEP_KEYS = {
    "id",
    "threadId",
    "parentId",
    "seq",
    "type",
    "name",
    "input",
    "output",
    "metadata",
    "isError",
    "streaming",
    "createdAt",
    "start",
    "end",
    "showInput",
    "language",
}
BASE = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def client(user) -> APIClient:
    """An API client authenticated with the user's token."""
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return api


def make_thread(owner, name: str = "chat", *, updated_minutes: int = 0) -> Thread:
    thread, _ = ensure_thread(owner, uuid.uuid4(), name=name)
    Thread.objects.filter(pk=thread.pk).update(updated_at=BASE + timedelta(minutes=updated_minutes))
    thread.refresh_from_db()
    return thread


def add_steps(thread: Thread, count: int, *, type_: str = "assistant_message") -> list[Step]:
    return [upsert_step(thread.pk, uuid.uuid4(), type=type_, output=f"entry {i}") for i in range(count)]


@pytest.fixture
def thread(user) -> Thread:
    return make_thread(user, "my chat")


@pytest.fixture
def foreign_thread(other_user) -> Thread:
    thread = make_thread(other_user, "their chat")
    add_steps(thread, 2)
    return thread


def url(thread_id: object, suffix: str = "") -> str:
    return f"/api/threads/{thread_id}/{suffix}"


# --- list -----------------------------------------------------------------------------


def test_list_is_newest_first_and_only_the_callers_live_threads(client, user, other_user):
    old = make_thread(user, "old", updated_minutes=1)
    newest = make_thread(user, "newest", updated_minutes=3)
    middle = make_thread(user, "middle", updated_minutes=2)
    make_thread(other_user, "not mine", updated_minutes=5)
    gone = make_thread(user, "deleted", updated_minutes=4)
    Thread.objects.filter(pk=gone.pk).update(deleted_at=BASE)

    response = client.get("/api/threads/")

    assert response.status_code == 200
    body = response.json()
    assert [t["id"] for t in body["results"]] == [str(newest.id), str(middle.id), str(old.id)]
    assert set(body["results"][0]) == THREAD_KEYS
    assert body["results"][0]["steps"] == []
    assert body["results"][0]["userIdentifier"] == "owner"
    assert body["next"] is None


def test_list_searches_names_case_insensitively(client, user, other_user):
    plans = make_thread(user, "Alpha plans", updated_minutes=1)
    both = make_thread(user, "alpha and beta", updated_minutes=2)
    make_thread(user, "beta only", updated_minutes=3)
    make_thread(other_user, "alpha of someone else", updated_minutes=4)

    def names(query: str) -> list[str]:
        return [t["id"] for t in client.get("/api/threads/", {"search": query}).json()["results"]]

    assert names("ALPHA") == [str(both.id), str(plans.id)]
    assert names("beta alpha") == [str(both.id)]
    assert names("nothing like it") == []


def test_list_search_rejects_null_characters_with_a_400_body(client, thread):
    response = client.get("/api/threads/", {"search": "a\x00b"})

    assert response.status_code == 400
    assert list(response.json()) == ["search"]


def test_list_cursor_pagination_walks_every_thread_once_in_order(client, user):
    threads = [make_thread(user, f"t{i}", updated_minutes=i) for i in range(7)]
    expected = [str(t.id) for t in reversed(threads)]

    seen: list[str] = []
    page_sizes: list[int] = []
    next_url: str | None = "/api/threads/?limit=3"
    while next_url:
        body = client.get(next_url).json()
        page_sizes.append(len(body["results"]))
        seen.extend(t["id"] for t in body["results"])
        next_url = body["next"]

    assert seen == expected
    assert page_sizes == [3, 3, 1]


def test_list_pagination_is_stable_when_threads_share_a_timestamp(client, user):
    threads = [make_thread(user, f"t{i}", updated_minutes=0) for i in range(5)]

    seen: list[str] = []
    next_url: str | None = "/api/threads/?limit=2"
    while next_url:
        body = client.get(next_url).json()
        seen.extend(t["id"] for t in body["results"])
        next_url = body["next"]

    assert sorted(seen) == sorted(str(t.id) for t in threads)
    assert len(seen) == len(set(seen))


@pytest.mark.parametrize(
    "cursor",
    [
        "not-a-cursor",
        base64.b64encode(b"p=not-a-date").decode(),
        base64.b64encode(b"o=1&p=2026-13-45").decode(),
    ],
)
def test_list_invalid_cursor_is_404_not_500(client, thread, cursor):
    response = client.get("/api/threads/", {"cursor": cursor})

    assert response.status_code == 404
    assert response.json() == {"detail": "Invalid cursor"}


# --- retrieve / rename ----------------------------------------------------------------


def test_retrieve_returns_the_thread_dict_without_steps(client, thread, user):
    add_steps(thread, 2)
    Thread.objects.filter(pk=thread.pk).update(metadata={"k": "v"}, chat_profile="fast")

    response = client.get(url(thread.id))

    assert response.status_code == 200
    body = response.json()
    assert set(body) == THREAD_KEYS
    assert body["id"] == str(thread.id)
    assert body["name"] == "my chat"
    assert body["userId"] == str(user.pk)
    assert body["tags"] == ["fast"]
    assert body["metadata"] == {"k": "v"}
    assert body["steps"] == []
    assert body["createdAt"].endswith("Z")


def test_rename_changes_the_name_and_moves_the_thread_to_the_top(client, user, thread):
    newer = make_thread(user, "newer", updated_minutes=10)

    response = client.patch(url(thread.id), {"name": "  Renamed  "}, format="json")

    assert response.status_code == 200
    assert response.json()["name"] == "Renamed"
    thread.refresh_from_db()
    assert thread.name == "Renamed"
    listed = client.get("/api/threads/").json()["results"]
    assert [t["id"] for t in listed] == [str(thread.id), str(newer.id)]


def test_rename_accepts_exactly_255_characters(client, thread):
    response = client.patch(url(thread.id), {"name": "n" * 255}, format="json")

    assert response.status_code == 200
    assert Thread.objects.get(pk=thread.pk).name == "n" * 255


def test_patch_without_a_name_changes_nothing(client, thread):
    response = client.patch(url(thread.id), {}, format="json")

    assert response.status_code == 200
    assert Thread.objects.get(pk=thread.pk).name == "my chat"


@pytest.mark.parametrize(
    ("body", "key"),
    [
        ({"name": "n" * 256}, "name"),
        ({"name": ""}, "name"),
        ({"name": "   "}, "name"),
        ({"name": 123}, "name"),
        ({"name": True}, "name"),
        ({"name": None}, "name"),
        ({"name": ["a"]}, "name"),
        ({"name": "a\x00b"}, "name"),
        ({"name": "ok", "metadata": {"x": 1}}, "non_field_errors"),
        ({"detail": "not a field"}, "non_field_errors"),
        (["name"], "non_field_errors"),
    ],
)
def test_rename_rejects_bad_bodies_with_drf_400(client, thread, body, key):
    response = client.patch(url(thread.id), body, format="json")

    assert response.status_code == 400
    errors = response.json()
    assert key in errors
    assert isinstance(errors[key], list)
    assert all(isinstance(message, str) for message in errors[key])
    assert Thread.objects.get(pk=thread.pk).name == "my chat"


def test_rename_rejects_malformed_json(client, thread):
    response = client.generic("PATCH", url(thread.id), "{not json", content_type="application/json")

    assert response.status_code == 400
    assert "detail" in response.json()


def test_rename_refuses_non_json_bodies(client, thread):
    response = client.patch(url(thread.id), {"name": "x"}, format="multipart")

    assert response.status_code == 415
    assert Thread.objects.get(pk=thread.pk).name == "my chat"


# --- soft delete ----------------------------------------------------------------------


def test_soft_delete_hides_the_thread_from_every_read(client, thread):
    add_steps(thread, 2)

    response = client.delete(url(thread.id))

    assert response.status_code == 204
    row = Thread.objects.get(pk=thread.pk)
    assert row.deleted_at is not None
    assert Step.objects.filter(thread=thread).count() == 2  # kept, only hidden
    assert client.get("/api/threads/").json()["results"] == []
    assert client.get("/api/threads/", {"search": "my chat"}).json()["results"] == []
    assert client.get(url(thread.id)).status_code == 404
    assert client.patch(url(thread.id), {"name": "back"}, format="json").status_code == 404
    assert client.get(url(thread.id, "history/")).status_code == 404
    assert client.get(url(thread.id, "bootstrap/")).status_code == 404
    assert client.delete(url(thread.id)).status_code == 404
    assert Thread.objects.get(pk=thread.pk).deleted_at == row.deleted_at
    assert Thread.objects.get(pk=thread.pk).name == "my chat"


# --- history --------------------------------------------------------------------------


def test_history_returns_the_transcript_in_seq_order(client, thread):
    steps = add_steps(thread, 4)
    # An upsert of an existing id keeps its seq: the order does not change.
    upsert_step(thread.pk, steps[0].id, type="assistant_message", output="edited")

    response = client.get(url(thread.id, "history/"))

    assert response.status_code == 200
    body = response.json()
    assert body["next"] is None
    assert [s["seq"] for s in body["results"]] == [1, 2, 3, 4]
    assert [s["id"] for s in body["results"]] == [str(s.id) for s in steps]
    assert body["results"][0]["output"] == "edited"
    assert set(body["results"][0]) == STEP_KEYS
    assert body["results"][0]["threadId"] == str(thread.id)


def test_history_after_seq_returns_only_what_came_after(client, thread):
    add_steps(thread, 5)

    body = client.get(url(thread.id, "history/"), {"after_seq": 3}).json()

    assert [s["seq"] for s in body["results"]] == [4, 5]
    assert client.get(url(thread.id, "history/"), {"after_seq": 5}).json() == {
        "next": None,
        "previous": None,
        "results": [],
        "elements": [],
    }


def test_history_pages_follow_next_until_the_end(client, thread):
    add_steps(thread, 5)

    seqs: list[list[int]] = []
    next_url: str | None = url(thread.id, "history/") + "?" + urlencode({"limit": 2, "after_seq": 0})
    while next_url:
        body = client.get(next_url).json()
        seqs.append([s["seq"] for s in body["results"]])
        next_url = body["next"]

    assert seqs == [[1, 2], [3, 4], [5]]


@pytest.mark.parametrize(
    "params",
    [
        {"after_seq": -1},
        {"after_seq": "abc"},
        {"after_seq": "1.5"},
        {"after_seq": "1e3"},
        {"after_seq": 2**63},
        {"limit": 0},
        {"limit": 501},
        {"limit": "x"},
    ],
)
def test_history_rejects_bad_parameters_with_drf_400(client, thread, params):
    add_steps(thread, 1)

    response = client.get(url(thread.id, "history/"), params)

    assert response.status_code == 400
    assert list(response.json()) == list(params)


# --- bootstrap ------------------------------------------------------------------------


def test_bootstrap_returns_thread_entries_and_only_untranscribed_pending(client, user, thread):
    steps = add_steps(thread, 3)
    first, second, done, failed = (uuid.uuid4() for _ in range(4))
    images = [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "aGk="}}]
    for offset, message_id in enumerate((second, first, done, failed)):
        accept_message(
            message_id=message_id, thread=thread, author=user, text=f"m-{message_id}", images=images
        )
        # second was accepted first: pending is ordered by acceptance time, not by id.
        AcceptedMessage.objects.filter(client_id=message_id).update(
            accepted_at=BASE + timedelta(seconds=offset)
        )
    AcceptedMessage.objects.filter(client_id=done).update(
        state=AcceptedMessage.State.TRANSCRIBED, step=steps[0]
    )
    AcceptedMessage.objects.filter(client_id=failed).update(state=AcceptedMessage.State.FAILED)
    other = make_thread(user, "other")
    accept_message(message_id=uuid.uuid4(), thread=other, author=user, text="elsewhere")

    response = client.get(url(thread.id, "bootstrap/"))

    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"thread", "entries", "omittedBeforeSeq", "pending", "failed", "asks", "elements"}
    assert body["omittedBeforeSeq"] is None  # the whole transcript
    assert body["asks"] == []  # no question of the app waits for an answer
    assert set(body["thread"]) == THREAD_KEYS
    assert body["thread"]["id"] == str(thread.id)
    assert body["thread"]["steps"] == []
    assert [e["id"] for e in body["entries"]] == [str(s.id) for s in steps]
    assert set(body["entries"][0]) == STEP_KEYS
    # Photos of pending sends are read like a step's (media_app): a reference, not the payload.
    assert body["pending"] == [
        {
            "id": str(message_id),
            "text": f"m-{message_id}",
            "acceptedAt": f"2026-01-01T00:00:0{n}Z",
            "images": [
                {"type": "image", "imageRef": f"{thread.id}/{AcceptedMessage.key(thread.id, message_id)}/0"}
            ],
        }
        for n, message_id in enumerate((second, first))
    ]
    assert [f["messageId"] for f in body["failed"]] == [str(failed)]


def fail_send(thread: Thread, text: str, *, reason: str = "stopped", seconds: int = 0, images=None):
    """A send accepted ``seconds`` after BASE, then failed for ``reason``."""
    message, _ = accept_message(
        message_id=uuid.uuid4(), thread=thread, author=thread.owner, text=text, images=images or []
    )
    AcceptedMessage.objects.filter(pk=message.pk).update(
        state=AcceptedMessage.State.FAILED, failure=reason, accepted_at=BASE + timedelta(seconds=seconds)
    )
    return message.client_id


def test_bootstrap_lists_failed_sends_oldest_first_with_their_reason_and_photo_count(client, user, thread):
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "aGk="}}
    later = fail_send(thread, "dropped second", seconds=5)
    earlier = fail_send(thread, "dropped first", seconds=1, images=[image, image])
    refused = fail_send(thread, "too much", reason="limit", seconds=3)
    unknown = fail_send(thread, "no reason recorded", reason="", seconds=7)
    waiting, _ = accept_message(message_id=uuid.uuid4(), thread=thread, author=user, text="waiting")
    done, _ = accept_message(message_id=uuid.uuid4(), thread=thread, author=user, text="done")
    AcceptedMessage.objects.filter(pk=done.pk).update(state=AcceptedMessage.State.TRANSCRIBED)
    fail_send(make_thread(user, "other"), "another thread's")

    body = client.get(url(thread.id, "bootstrap/")).json()

    assert body["failed"] == [
        {
            "messageId": str(earlier),
            "text": "dropped first",
            "reason": "stopped",
            "acceptedAt": "2026-01-01T00:00:01Z",
            "imageCount": 2,
        },
        {
            "messageId": str(refused),
            "text": "too much",
            "reason": "limit",
            "acceptedAt": "2026-01-01T00:00:03Z",
            "imageCount": 0,
        },
        {
            "messageId": str(later),
            "text": "dropped second",
            "reason": "stopped",
            "acceptedAt": "2026-01-01T00:00:05Z",
            "imageCount": 0,
        },
        {
            "messageId": str(unknown),
            "text": "no reason recorded",
            "reason": "",
            "acceptedAt": "2026-01-01T00:00:07Z",
            "imageCount": 0,
        },
    ]
    # A failed send is not pending, and a pending one is not failed.
    assert [p["id"] for p in body["pending"]] == [str(waiting.client_id)]


def test_bootstrap_lists_only_the_latest_50_failed_sends(client, thread):
    for n in range(53):
        fail_send(thread, f"dropped {n}", seconds=n)
    # Two sends accepted in the very instant of the 50th newest: still no more than 50.
    fail_send(thread, "same instant", seconds=3)

    failed = client.get(url(thread.id, "bootstrap/")).json()["failed"]

    assert len(failed) == 50
    assert failed[-1]["text"] == "dropped 52"
    assert [f["acceptedAt"] for f in failed] == sorted(f["acceptedAt"] for f in failed)
    assert failed[0]["acceptedAt"] == "2026-01-01T00:00:03Z"
    assert [f["text"] for f in failed[1:]] == [f"dropped {n}" for n in range(4, 53)]


def test_bootstrap_with_a_limit_still_lists_every_pending_and_failed_send(client, user, thread):
    add_steps(thread, 5)
    dropped = fail_send(thread, "dropped")
    waiting, _ = accept_message(message_id=uuid.uuid4(), thread=thread, author=user, text="waiting")

    body = client.get(url(thread.id, "bootstrap/"), {"limit": 1}).json()

    assert len(body["entries"]) == 1
    assert [p["id"] for p in body["pending"]] == [str(waiting.client_id)]
    assert [f["messageId"] for f in body["failed"]] == [str(dropped)]


def test_bootstrap_of_another_users_thread_shows_none_of_its_failed_sends(client, foreign_thread):
    fail_send(foreign_thread, "their dropped send")

    response = client.get(url(foreign_thread.id, "bootstrap/"))

    assert response.status_code == 404
    assert "their dropped send" not in response.content.decode()


def test_bootstrap_limit_returns_the_last_entries_in_order(client, thread):
    steps = add_steps(thread, 5)

    body = client.get(url(thread.id, "bootstrap/"), {"limit": 2}).json()

    assert [e["id"] for e in body["entries"]] == [str(steps[3].id), str(steps[4].id)]
    assert [e["seq"] for e in body["entries"]] == [4, 5]


def test_bootstrap_of_an_empty_thread(client, thread):
    body = client.get(url(thread.id, "bootstrap/")).json()

    assert body["entries"] == []
    assert body["pending"] == []
    assert body["failed"] == []


@pytest.mark.parametrize("limit", [0, -3, "many", 1001])
def test_bootstrap_rejects_a_bad_limit(client, thread, limit):
    response = client.get(url(thread.id, "bootstrap/"), {"limit": limit})

    assert response.status_code == 400
    assert list(response.json()) == ["limit"]


# --- 404 for what is not the caller's -------------------------------------------------

DETAIL_ENDPOINTS = [
    ("get", ""),
    ("patch", ""),
    ("delete", ""),
    ("get", "history/"),
    ("get", "bootstrap/"),
]


@pytest.mark.parametrize(("method", "suffix"), DETAIL_ENDPOINTS)
@pytest.mark.parametrize("kind", ["foreign", "random-uuid", "not-a-uuid", "deleted"])
def test_every_detail_endpoint_answers_404_for_threads_that_are_not_the_callers(
    client, user, foreign_thread, method, suffix, kind
):
    if kind == "foreign":
        target = str(foreign_thread.id)
    elif kind == "random-uuid":
        target = str(uuid.uuid4())
    elif kind == "not-a-uuid":
        target = "not-a-uuid"
    else:
        deleted = make_thread(user, "mine but deleted")
        Thread.objects.filter(pk=deleted.pk).update(deleted_at=BASE)
        target = str(deleted.id)

    kwargs = {"data": {"name": "hijacked"}, "format": "json"} if method == "patch" else {}
    response = getattr(client, method)(url(target, suffix), **kwargs)

    assert response.status_code == 404
    assert response.json() == {"detail": "Thread not found."}
    foreign_thread.refresh_from_db()
    assert foreign_thread.name == "their chat"
    assert foreign_thread.deleted_at is None


def test_list_never_shows_another_users_threads(client, foreign_thread):
    assert client.get("/api/threads/").json()["results"] == []
    assert client.get("/api/threads/", {"search": "their"}).json()["results"] == []


# --- authentication -------------------------------------------------------------------

ALL_ENDPOINTS = [("get", "/api/threads/")] + [(m, f"/api/threads/{{id}}/{s}") for m, s in DETAIL_ENDPOINTS]


@pytest.mark.parametrize(("method", "path"), ALL_ENDPOINTS)
def test_unauthenticated_requests_are_refused(thread, method, path):
    response = getattr(APIClient(), method)(path.format(id=thread.id))

    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Token"
    assert Thread.objects.get(pk=thread.pk).deleted_at is None


def test_a_wrong_token_is_refused(thread):
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")

    assert api.get(url(thread.id)).status_code == 401


def test_token_authentication_reads_and_writes(client, thread):
    assert client.get(url(thread.id)).status_code == 200
    assert client.patch(url(thread.id), {"name": "via token"}, format="json").status_code == 200
    assert Thread.objects.get(pk=thread.pk).name == "via token"


@pytest.fixture
def session_client(user) -> APIClient:
    """A browser-like client: session cookie, CSRF checks enforced."""
    api = APIClient(enforce_csrf_checks=True)
    # django-axes checks every authenticate() call against its lockouts, so it needs the request.
    assert api.login(request=HttpRequest(), username="owner", password="pw-for-tests-1")
    return api


def test_session_authentication_reads_without_csrf(session_client, thread):
    assert session_client.get(url(thread.id)).status_code == 200


@pytest.mark.parametrize("method", ["patch", "delete"])
def test_session_writes_without_a_csrf_token_are_forbidden(session_client, thread, method):
    response = getattr(session_client, method)(url(thread.id), {"name": "csrf"}, format="json")

    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]
    row = Thread.objects.get(pk=thread.pk)
    assert (row.name, row.deleted_at) == ("my chat", None)


def test_session_writes_with_a_csrf_token_work(session_client, thread):
    secret = get_random_string(32)
    session_client.cookies["csrftoken"] = secret

    response = session_client.patch(
        url(thread.id), {"name": "csrf ok"}, format="json", HTTP_X_CSRFTOKEN=secret
    )

    assert response.status_code == 200
    assert Thread.objects.get(pk=thread.pk).name == "csrf ok"


# --- send throttling ------------------------------------------------------------------


class _SendProbe(APIView):
    throttle_classes = [SendRateThrottle]

    def post(self, request):
        return Response({"ok": True})


@override_settings(
    REST_FRAMEWORK={
        "DEFAULT_AUTHENTICATION_CLASSES": ["rest_framework.authentication.TokenAuthentication"],
        "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
        "DEFAULT_THROTTLE_RATES": {"sends": "3/min"},
    },
)
def test_send_throttle_limits_each_user_separately(user, other_user):
    factory = APIRequestFactory()
    view = _SendProbe.as_view()
    tokens = {u.pk: Token.objects.create(user=u).key for u in (user, other_user)}

    def send(who) -> int:
        request = factory.post("/probe", {}, format="json", HTTP_AUTHORIZATION=f"Token {tokens[who.pk]}")
        return view(request).status_code

    assert [send(user) for _ in range(4)] == [200, 200, 200, 429]
    assert send(other_user) == 200
    refused = view(factory.post("/probe", {}, format="json", HTTP_AUTHORIZATION=f"Token {tokens[user.pk]}"))
    assert refused.status_code == 429
    assert int(refused.headers["Retry-After"]) > 0


def test_send_throttle_rate_comes_from_settings_and_can_be_switched_off():
    assert SENDS.rate() == Rate.parse(os.environ.get("SEND_THROTTLE_RATE", "120/min"))
    with override_settings(REST_FRAMEWORK={"DEFAULT_THROTTLE_RATES": {"sends": "off"}}):
        assert SENDS.rate() is None
        assert SendRateThrottle().allow_request(None, None) is True


def test_rename_names_the_unknown_fields_it_refuses(client, thread):
    response = client.patch(url(thread.id), {"name": "ok", "metadata": {}, "tags": []}, format="json")

    assert response.status_code == 400
    assert response.json() == {
        "non_field_errors": ["Unknown fields: metadata, tags. Only the name of a thread can be changed."]
    }
