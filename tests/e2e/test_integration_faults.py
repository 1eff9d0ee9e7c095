"""Integration sends survive their box owner's death: answered once, or failed visibly.

Two daphne processes on PostgreSQL and Redis, the engine runtime (integration threads are the
engine's). Process A owns the box: it is answering an integration message in one thread, with
a message for another thread of the box accepted behind it, when it is killed (``kill -9``).
Process B's recovery loop takes the box over: the cut turn ends with a visible error step,
the pending message is answered, and each reaches the box's webhook exactly once. And a
webhook delivery whose next attempt is due while every process is down is delivered once they
are back (its attempts are tasks in the database).
"""

import asyncio
import json
import uuid
from typing import Any

import aiohttp
import pytest
from asgiref.sync import sync_to_async
from django_tasks_db.models import DBTaskResult

from sessions_app.models import ServerProcess
from sessions_app.runtime.chat_session import SERVER_STOPPED_TEXT
from tests.support.client import api_token
from tests.support.loopback import serving
from tests.support.waiting import wait_until_async
from tests.support.webhook_receiver import Receiver, hooked_box
from threads_app.models import AcceptedMessage, Box, Step

pytestmark = [
    pytest.mark.fault,
    pytest.mark.two_process,  # skipped without PostgreSQL and Redis (tests/conftest.py)
    pytest.mark.django_db(transaction=True),
]


@pytest.fixture
async def receiver():
    hook = Receiver()
    async with serving(hook.handle) as port:
        hook.url = f"http://127.0.0.1:{port}/hook"
        yield hook


@pytest.fixture
def pair(server_factory, private_redis, tmp_path):
    """Two processes on a Redis of their own: another channel layer than the rest of the run's
    servers, which therefore neither recover their work nor run their webhook attempts."""
    env = {
        "REDIS_URL": private_redis.url,
        "CHAT_APP": "sessions_app.default_app",
        "ECHO_STATE_DIR": str(tmp_path / "echo"),
        "WEBHOOK_ALLOWED_HOSTS": "127.0.0.1",
        "TASK_WORKER_THREADS": "2",
        "SEND_THROTTLE_RATE": "1000/min",
    }
    a, b = server_factory.start(**env), server_factory.start(**env)
    yield a, b
    a.stop()
    b.stop()


async def post(server, token: str, thread_id: str, text: str) -> tuple[int, str]:
    message_id = str(uuid.uuid4())
    async with (
        aiohttp.ClientSession(headers={"Authorization": f"Token {token}"}) as http,
        http.post(
            f"{server.url}/api/integrations/threads/{thread_id}/messages/",
            json={"messageId": message_id, "message": text},
        ) as response,
    ):
        await response.read()
        return response.status, message_id


@sync_to_async
def send_record(message_id: str) -> dict[str, Any]:
    return dict(
        AcceptedMessage.objects.filter(client_id=message_id).values("state", "outcome", "failure").get()
    )


@sync_to_async
def transcript(thread_id: str) -> list[tuple[str, str, bool]]:
    return list(
        Step.objects.filter(thread_id=thread_id).order_by("seq").values_list("type", "output", "is_error")
    )


@sync_to_async
def box_owner_pid(box_id: Any) -> int | None:
    owner = Box.objects.get(pk=box_id).runtime_owner
    return ServerProcess.objects.filter(address=owner).values_list("pid", flat=True).first()


async def test_integration_sends_of_a_killed_box_owner_are_answered_once(pair, make_user, receiver):
    a, b = pair
    user = make_user()
    token = await api_token(user)
    box = await hooked_box(user, receiver.url)
    cut_thread, queued_thread = str(uuid.uuid4()), str(uuid.uuid4())
    status, cut = await post(a, token, cut_thread, "!slow 0.3\n" + " ".join(f"w{i}" for i in range(30)))
    assert status == 202
    assert await box_owner_pid(box.pk) == a.process.pid
    await wait_until_async(lambda: _transcribed(cut), timeout=15)  # its turn began on A
    status, queued = await post(a, token, queued_thread, "waiting behind the other thread")
    assert status == 202
    assert (await send_record(queued))["state"] == AcceptedMessage.State.PENDING

    a.kill()

    response_of_cut = await receiver.response_of(cut, timeout=30)
    response_of_queued = await receiver.response_of(queued, timeout=30)
    await asyncio.sleep(2)  # a second delivery or a second answer would land by now
    evidence = json.dumps(
        {
            "deliveries": receiver.payloads(),
            "cut": await transcript(cut_thread),
            "queued": await transcript(queued_thread),
        },
        indent=1,
        default=str,
    )
    assert [p["messageId"] for p in receiver.payloads()].count(cut) == 1, evidence
    assert [p["messageId"] for p in receiver.payloads()].count(queued) == 1, evidence
    assert response_of_cut["isError"] and response_of_cut["text"] == SERVER_STOPPED_TEXT, evidence
    assert response_of_queued == {
        "text": "Echo #1: waiting behind the other thread",
        "isError": False,
        "outcome": "success",
        "stepIds": response_of_queued["stepIds"],
    }, evidence
    assert await send_record(cut) == {"state": "transcribed", "outcome": "error", "failure": ""}
    assert await send_record(queued) == {"state": "transcribed", "outcome": "replied", "failure": ""}
    assert (await transcript(cut_thread))[-1] == ("assistant_message", SERVER_STOPPED_TEXT, True), evidence
    assert [t for t, _, _ in await transcript(queued_thread)] == ["user_message", "assistant_message"], (
        evidence
    )
    assert await box_owner_pid(box.pk) == b.process.pid

    # The cut thread carries on at the new owner.
    status, again = await post(b, token, cut_thread, "again")
    assert status == 202
    response = await receiver.response_of(again, timeout=20)
    assert not response["isError"] and response["text"].endswith(": again"), response


async def _transcribed(message_id: str) -> bool:
    state: str = (await send_record(message_id))["state"]
    return state == AcceptedMessage.State.TRANSCRIBED


@sync_to_async
def attempts_of(delivery: str) -> list[tuple[int, str, str]]:
    """(attempt number, status, what it returned) of each task of a webhook delivery."""
    rows = DBTaskResult.objects.filter(queue_name__startswith="webhooks-").order_by("enqueued_at")
    return [
        (r.args_kwargs["args"][3], r.status, str(r.return_value))
        for r in rows
        if r.args_kwargs["args"][2] == delivery
    ]


@sync_to_async
def attempt_errors(delivery: str) -> list[tuple[int, str, str]]:
    """(attempt number, worker ids, traceback) of each failed task of a webhook delivery."""
    rows = DBTaskResult.objects.filter(queue_name__startswith="webhooks-", status="FAILED")
    return [
        (r.args_kwargs["args"][3], str(r.worker_ids), r.traceback or "")
        for r in rows
        if r.args_kwargs["args"][2] == delivery
    ]


async def test_a_webhook_delivery_pending_while_every_process_restarts_is_delivered_after(
    server_factory, private_redis, tmp_path, make_user, receiver
):
    env = {
        "REDIS_URL": private_redis.url,  # a deployment of their own (see ``pair``)
        "CHAT_APP": "sessions_app.default_app",
        "ECHO_STATE_DIR": str(tmp_path / "echo"),
        "WEBHOOK_ALLOWED_HOSTS": "127.0.0.1",
        "TASK_WORKER_THREADS": "2",
        "WEBHOOK_RETRY_DELAYS": "4",
    }
    a, b = server_factory.start(**env), server_factory.start(**env)
    user = make_user()
    token = await api_token(user)
    await hooked_box(user, receiver.url)
    receiver.statuses = [503]  # the first attempt fails; the next is due 4 s later
    status, message_id = await post(a, token, str(uuid.uuid4()), "deliver me after a restart")
    assert status == 202
    (_, first, _), *_ = await receiver.wait(1, timeout=20)
    delivery = first["X-Tether-Delivery"]
    await wait_until_async(lambda: _first_attempt_recorded(delivery), timeout=20)
    a.kill()
    b.kill()  # every process is gone while the second attempt waits in the database
    await asyncio.sleep(1)
    # Started off the event loop: the receiver answering the next attempt runs on it, and a
    # slow start (a loaded machine) must not hold that answer past the attempt's timeout.
    await asyncio.gather(asyncio.to_thread(a.restart, kill=True), asyncio.to_thread(b.restart, kill=True))

    deliveries = await receiver.wait(2, timeout=30)
    await asyncio.sleep(1)  # a third attempt would land by now
    evidence = json.dumps(
        {
            "attempts": await attempts_of(delivery),
            "errors": await attempt_errors(delivery),
            "payloads": receiver.payloads(),
        },
        default=str,
    )
    assert [headers["X-Tether-Delivery"] for _, headers, _ in deliveries] == [delivery, delivery], evidence
    assert receiver.payloads()[1]["messageId"] == message_id, evidence
    assert await attempts_of(delivery) == [
        (1, "SUCCESSFUL", "failed (HTTP 503); attempt 2 in 4s"),
        (2, "SUCCESSFUL", "delivered (attempt 2)"),
    ], evidence
    a.stop()
    b.stop()


async def _first_attempt_recorded(delivery: str) -> bool:
    attempts = await attempts_of(delivery)
    return bool(attempts) and attempts[0][1] == "SUCCESSFUL"
