"""POST /api/integrations/threads/<id>/messages/: 202 on acceptance, the complete response in
the transcript and at the box's webhook (signed, retried), one turn at a time per thread."""

import asyncio
import hashlib
import hmac
import itertools
import json
import re
import time
import uuid
from typing import Any

import aiohttp
import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from sessions_app import webhooks
from tests.support.client import api_token, user_cookie
from tests.support.loopback import serving
from tests.support.waiting import wait_until_async
from tests.support.webhook_receiver import Receiver, hooked_box
from threads_app.models import AcceptedMessage, Box, Step, Thread

pytestmark = pytest.mark.django_db(transaction=True)

RETRY_DELAYS = (0.1, 0.2, 0.4)
THROTTLE = 4


def url_of(server, thread_id: str) -> str:
    return f"{server.url}/api/integrations/threads/{thread_id}/messages/"


async def post(
    server, thread_id: str, body: Any, *, token: str | None = None, headers: dict[str, str] | None = None
) -> tuple[int, Any, dict[str, str]]:
    all_headers = dict(headers or {})
    if token:
        all_headers["Authorization"] = f"Token {token}"
    async with (
        aiohttp.ClientSession(headers=all_headers) as http,
        http.post(url_of(server, thread_id), json=body) as response,
    ):
        try:
            answer = await response.json(content_type=None)
        except json.JSONDecodeError:
            answer = None
        return response.status, answer, dict(response.headers)


def message(text: str) -> dict[str, str]:
    return {"messageId": str(uuid.uuid4()), "message": text}


def accepted_answer(thread_id: str, body: dict[str, str]) -> dict[str, str]:
    return {"threadId": thread_id, "messageId": body["messageId"], "status": "accepted"}


@pytest.fixture
async def receiver():
    hook = Receiver()
    async with serving(hook.handle) as port:
        hook.url = f"http://127.0.0.1:{port}/hook"
        yield hook


@pytest.fixture(scope="module")
def retry_server(server_factory, tmp_path_factory):
    """The default app with short webhook retry delays and a small send throttle."""
    return server_factory.start(
        CHAT_APP="sessions_app.default_app",
        ECHO_STATE_DIR=str(tmp_path_factory.mktemp("echo-integrations")),
        WEBHOOK_RETRY_DELAYS=",".join(str(d) for d in RETRY_DELAYS),
        SEND_THROTTLE_RATE=f"{THROTTLE}/min",
        WEBHOOK_ALLOWED_HOSTS="127.0.0.1",
        TASK_WORKER_THREADS="2",
    )


@sync_to_async
def steps_of(thread_id: str) -> list[Step]:
    return list(Step.objects.filter(thread_id=thread_id).order_by("seq"))


@sync_to_async
def accepted(**filters: Any) -> list[AcceptedMessage]:
    return list(AcceptedMessage.objects.filter(**filters))


def signed(secret: str, headers: dict[str, str], body: bytes) -> bool:
    """The receiver's check: the signature covers the timestamp, the delivery id and the body."""
    message = f"{headers['X-Tether-Timestamp']}.{headers['X-Tether-Delivery']}.".encode() + body
    expected = "sha256=" + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, headers["X-Tether-Signature"])


async def test_202_before_the_engine_answers_then_the_response_in_the_transcript_and_at_the_webhook(
    engine_server, make_user, receiver
):
    user = make_user()
    token = await api_token(user)
    box = await hooked_box(user, receiver.url)
    assert len(box.webhook_secret) == 64  # generated for every box
    thread_id = str(uuid.uuid4())
    body = message("!slow 0.2\nhello integration")

    status, answer, _ = await post(engine_server, thread_id, body, token=token)

    assert status == 202 and answer == accepted_answer(thread_id, body)
    assert receiver.deliveries == []  # answered before the engine did
    assert [s.type for s in await steps_of(thread_id)] in ([], ["user_message"])
    thread = await Thread.objects.aget(pk=thread_id)
    assert thread.owner_id == user.pk and thread.box_id == box.pk  # opened for the caller on first use

    (_, headers, raw), *_ = await receiver.wait(1)
    assert signed(box.webhook_secret, headers, raw)
    assert re.fullmatch(r"[0-9a-f]{32}", headers["X-Tether-Delivery"])
    assert abs(int(headers["X-Tether-Timestamp"]) - time.time()) < 60
    assert headers["Content-Type"] == "application/json"
    payload = json.loads(raw)
    user_step, assistant_step = await steps_of(thread_id)
    assert payload == {
        "threadId": thread_id,
        "messageId": body["messageId"],
        "response": {
            "text": "Echo #1: hello integration",
            "isError": False,
            "outcome": "success",
            "stepIds": [str(assistant_step.id)],
        },
    }
    assert (user_step.type, user_step.id, user_step.metadata["acceptedIds"]) == (
        "user_message",
        AcceptedMessage.key(user_step.thread_id, uuid.UUID(body["messageId"])),
        [body["messageId"]],
    )
    assert (assistant_step.type, assistant_step.output) == ("assistant_message", "Echo #1: hello integration")
    (record,) = await accepted(client_id=body["messageId"])
    assert record.state == AcceptedMessage.State.TRANSCRIBED and record.queued is False


async def test_a_failing_receiver_is_retried_with_backoff_and_a_refusing_one_is_not(
    retry_server, make_user, receiver
):
    user = make_user()
    token = await api_token(user)
    box = await hooked_box(user, receiver.url)
    receiver.statuses = [500, 502]
    body = message("retry me")
    thread_id = str(uuid.uuid4())
    assert (await post(retry_server, thread_id, body, token=token))[0] == 202

    deliveries = await receiver.wait(3)
    await asyncio.sleep(0.3)  # no fourth attempt after the 200
    assert len(deliveries) == 3
    assert len({headers["X-Tether-Delivery"] for _, headers, _ in deliveries}) == 1
    assert len({raw for _, _, raw in deliveries}) == 1
    assert all(signed(box.webhook_secret, headers, raw) for _, headers, raw in deliveries)
    gaps = [later[0] - earlier[0] for earlier, later in itertools.pairwise(deliveries)]
    assert gaps[0] >= RETRY_DELAYS[0] * 0.9 and gaps[1] >= RETRY_DELAYS[1] * 0.9
    assert receiver.payloads()[0]["response"]["text"] == "Echo #1: retry me"

    receiver.statuses = [400]
    second = message("refused")
    assert (await post(retry_server, thread_id, second, token=token))[0] == 202
    await receiver.wait(4)
    await asyncio.sleep(sum(RETRY_DELAYS[:2]) + 0.1)
    assert len(receiver.deliveries) == 4  # a 4xx is not retried
    assert receiver.payloads()[3]["response"]["text"] == "Echo #2: refused"


async def test_two_threads_of_one_box_take_turns_and_each_resumes_its_own_conversation(
    engine_server, make_user, receiver
):
    user = make_user()
    token = await api_token(user)
    await hooked_box(user, receiver.url)
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    for thread_id, text, expected in [
        (first, "a one", "Echo #1: a one"),
        (second, "b one", "Echo #1: b one"),
        (first, "a two", "Echo #2: a two"),
        (second, "b two", "Echo #2: b two"),
    ]:
        body = message(text)
        assert (await post(engine_server, thread_id, body, token=token))[0] == 202
        assert (await receiver.response_of(body["messageId"]))["text"] == expected

    # At once: the second waits for the first thread's turn, then parks it.
    bodies = {first: message("a three"), second: message("b three")}
    results = await asyncio.gather(*(post(engine_server, t, b, token=token) for t, b in bodies.items()))
    assert [status for status, _, _ in results] == [202, 202]
    assert (await receiver.response_of(bodies[first]["messageId"]))["text"] == "Echo #3: a three"
    assert (await receiver.response_of(bodies[second]["messageId"]))["text"] == "Echo #3: b three"
    for thread_id, prefix in ((first, "a"), (second, "b")):
        outputs = [s.output for s in await steps_of(thread_id) if s.type == "assistant_message"]
        assert outputs == [
            f"Echo #{n}: {prefix} {word}" for n, word in ((1, "one"), (2, "two"), (3, "three"))
        ]
    threads = await sync_to_async(lambda: {str(t.pk): t.engine_session_id for t in Thread.objects.all()})()
    assert threads[first] and threads[second] and threads[first] != threads[second]


async def test_a_busy_thread_refuses_without_accepting_and_a_repeat_is_the_same_202(
    engine_server, make_user, receiver
):
    user = make_user()
    token = await api_token(user)
    await hooked_box(user, receiver.url)
    thread_id = str(uuid.uuid4())
    first = message("!slow 0.2\nkeep busy")
    assert (await post(engine_server, thread_id, first, token=token))[:2] == (
        202,
        accepted_answer(thread_id, first),
    )

    other = message("while busy")
    status, answer, headers = await post(engine_server, thread_id, other, token=token)
    assert (status, answer, headers.get("Retry-After")) == (409, {"detail": "thread busy"}, "1")
    assert await accepted(client_id=other["messageId"]) == []
    repeat = await post(engine_server, thread_id, first, token=token)
    assert repeat[:2] == (202, accepted_answer(thread_id, first))

    assert (await receiver.response_of(first["messageId"]))["text"] == "Echo #1: keep busy"
    status, answer, _ = await post(engine_server, thread_id, other, token=token)
    assert (status, answer) == (202, accepted_answer(thread_id, other))
    assert (await receiver.response_of(other["messageId"]))["text"] == "Echo #2: while busy"
    assert (await post(engine_server, thread_id, first, token=token))[0] == 202  # an old repeat
    await asyncio.sleep(0.3)
    assert [p["messageId"] for p in receiver.payloads()] == [first["messageId"], other["messageId"]]
    assert len(await accepted(thread_id=thread_id)) == 2


async def test_concurrent_identical_messages_are_one_record_one_turn_and_one_answer(
    engine_server, make_user, receiver
):
    user = make_user()
    token = await api_token(user)
    await hooked_box(user, receiver.url)
    thread_id = str(uuid.uuid4())
    body = message("only once")
    results = await asyncio.gather(*(post(engine_server, thread_id, body, token=token) for _ in range(10)))
    assert {(status, json.dumps(answer)) for status, answer, _ in results} == {
        (202, json.dumps(accepted_answer(thread_id, body)))
    }
    assert (await receiver.response_of(body["messageId"]))["text"] == "Echo #1: only once"
    await asyncio.sleep(0.3)
    assert len(receiver.deliveries) == 1
    assert len(await accepted(client_id=body["messageId"])) == 1
    assert [s.type for s in await steps_of(thread_id)] == ["user_message", "assistant_message"]


async def test_refusals(engine_server, make_user):
    owner, other = make_user(), make_user()
    token, other_token = await api_token(owner), await api_token(other)
    thread_id = str(uuid.uuid4())
    first = message("mine")
    assert (await post(engine_server, thread_id, first, token=token))[0] == 202

    # Another user's id: that user's thread is not touched, nor blocked: the caller gets a
    # thread of its own for the id (the same one each time).
    intruder = message("let me in")
    status, answer, _ = await post(engine_server, thread_id, intruder, token=other_token)
    assert status == 202 and answer["threadId"] != thread_id
    for _ in range(100):  # 409 while its first turn runs
        status, again, _ = await post(engine_server, thread_id, message("me again"), token=other_token)
        if status != 409:
            break
        await asyncio.sleep(0.1)
    assert status == 202 and again["threadId"] == answer["threadId"]
    answer_of_other = answer["threadId"]
    own = await Thread.objects.aget(pk=answer["threadId"])
    assert own.owner_id == other.pk
    assert not await AcceptedMessage.objects.filter(thread_id=thread_id, author=other).aexists()

    # The caller's own deleted thread, a path that is not a UUID: 404, nothing recorded.
    deleted = str(uuid.uuid4())
    assert (await post(engine_server, deleted, message("soon gone"), token=token))[0] == 202
    await Thread.objects.filter(pk=deleted).aupdate(deleted_at=timezone.now())
    assert (await post(engine_server, deleted, message("gone"), token=token))[0] == 404
    assert (await post(engine_server, "not-a-uuid", message("x"), token=token))[0] == 404

    # DRF 400 bodies.
    status, errors, _ = await post(
        engine_server, thread_id, {"messageId": "nope", "message": "x"}, token=token
    )
    assert status == 400 and set(errors) == {"messageId"}
    status, errors, _ = await post(engine_server, thread_id, {"messageId": str(uuid.uuid4())}, token=token)
    assert status == 400 and set(errors) == {"message"}
    status, errors, _ = await post(engine_server, thread_id, {**message(""), "message": ""}, token=token)
    assert status == 400 and set(errors) == {"message"}
    status, errors, _ = await post(engine_server, thread_id, ["not", "an", "object"], token=token)
    assert status == 400 and set(errors) == {"non_field_errors"}

    # The message id is the key within the thread: other content is a 409; in another thread
    # it names another send.
    reused = {"messageId": first["messageId"], "message": "different text"}
    status, answer, _ = await post(engine_server, thread_id, reused, token=token)
    assert status == 409 and "messageId" in answer["detail"]
    assert (await post(engine_server, str(uuid.uuid4()), first, token=token))[0] == 202

    # No credentials.
    assert (await post(engine_server, thread_id, message("anonymous")))[0] == 401
    assert {str(m.thread_id) for m in await accepted(author=other)} == {
        answer_of_other
    }  # its own thread only
    assert {str(m.client_id) for m in await accepted(thread_id=thread_id)} == {first["messageId"]}
    await wait_until_async(lambda: _answered(thread_id, 1))


async def _answered(thread_id: str, turns: int) -> bool:
    return sum(s.type == "assistant_message" for s in await steps_of(thread_id)) >= turns


async def test_session_authentication_needs_the_csrf_token(engine_server, make_user):
    user = make_user()
    cookie = await user_cookie(engine_server.url, user)
    csrf = re.search(r"csrftoken=([^;]+)", cookie)
    assert csrf
    thread_id = str(uuid.uuid4())
    body = message("from a browser")
    status, answer, _ = await post(engine_server, thread_id, body, headers={"Cookie": cookie})
    assert status == 403 and "CSRF" in answer["detail"]
    headers = {"Cookie": cookie, "X-CSRFToken": csrf.group(1)}
    assert (await post(engine_server, thread_id, body, headers=headers))[:2] == (
        202,
        accepted_answer(thread_id, body),
    )
    await wait_until_async(lambda: _answered(thread_id, 1))


async def test_sends_are_throttled(retry_server, make_user, receiver):
    user = make_user()
    token = await api_token(user)
    await hooked_box(user, receiver.url)
    threads = [str(uuid.uuid4()) for _ in range(THROTTLE + 1)]
    for thread_id in threads[:THROTTLE]:
        assert (await post(retry_server, thread_id, message("counted"), token=token))[0] == 202
    status, answer, headers = await post(retry_server, threads[-1], message("one too many"), token=token)
    assert status == 429 and "throttled" in answer["detail"] and int(headers["Retry-After"]) > 0
    await receiver.wait(THROTTLE)


# --- webhooks.attempt in process -----------------------------------------------------------------


async def test_deliver_makes_a_secret_for_a_box_without_one(make_user, receiver, settings):
    settings.WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    box = await hooked_box(make_user(), receiver.url)
    await Box.objects.filter(pk=box.pk).aupdate(webhook_secret="")
    box = await Box.objects.aget(pk=box.pk)
    attempt = await webhooks.attempt(box, webhooks.encode({"hello": "receiver"}), uuid.uuid4().hex)
    assert attempt.outcome is webhooks.Outcome.DELIVERED
    stored = (await Box.objects.aget(pk=box.pk)).webhook_secret
    assert len(stored) == 64 and stored == box.webhook_secret
    (_, headers, raw), *_ = receiver.deliveries
    assert signed(stored, headers, raw) and json.loads(raw) == {"hello": "receiver"}


@pytest.mark.two_process  # skipped without PostgreSQL and Redis (tests/conftest.py)
async def test_a_message_through_another_process_runs_in_the_box_owner(
    engine_server, retry_server, make_user, receiver
):
    user = make_user()
    token = await api_token(user)
    box = await hooked_box(user, receiver.url)
    thread_id = str(uuid.uuid4())
    first = message("!slow 0.2\nat the owner")
    assert (await post(engine_server, thread_id, first, token=token))[0] == 202  # claims the box
    owner = (await Box.objects.aget(pk=box.pk)).runtime_owner
    status, answer, _ = await post(retry_server, thread_id, message("elsewhere"), token=token)
    assert (status, answer) == (409, {"detail": "thread busy"})  # the owner's busy thread
    assert (await receiver.response_of(first["messageId"]))["text"] == "Echo #1: at the owner"
    second = message("through the mailbox")
    assert (await post(retry_server, thread_id, second, token=token))[:2] == (
        202,
        accepted_answer(thread_id, second),
    )
    assert (await receiver.response_of(second["messageId"]))["text"] == "Echo #2: through the mailbox"
    assert (await Box.objects.aget(pk=box.pk)).runtime_owner == owner
