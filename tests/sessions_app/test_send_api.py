"""POST /api/chat/send and the socket's client_message: one acceptance path, idempotent."""

import asyncio
import functools
import os
import signal
import subprocess
import uuid
from typing import Any

import aiohttp
import pytest
from asgiref.sync import sync_to_async

from tests.support.client import api_token, signed_in
from tests.support.waiting import wait_until_async
from threads_app.models import AcceptedMessage, Step, Thread

pytestmark = pytest.mark.django_db(transaction=True)


async def post_send(server, token: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    async with (
        aiohttp.ClientSession(headers={"Authorization": f"Token {token}"}) as http,
        http.post(f"{server.url}/api/chat/send", json=body) as response,
    ):
        return response.status, await response.json()


@sync_to_async
def accepted(**filters) -> list[AcceptedMessage]:
    return list(AcceptedMessage.objects.filter(**filters))


@sync_to_async
def user_steps(thread_id: str) -> list[Step]:
    return list(Step.objects.filter(thread_id=thread_id, type="user_message").order_by("seq"))


async def test_twenty_concurrent_identical_sends_make_one_record_and_twenty_identical_answers(
    engine_server, make_user
):
    token = await api_token(make_user())
    body = {"messageId": str(uuid.uuid4()), "message": "only once, please"}
    results = await asyncio.gather(*(post_send(engine_server, token, body) for _ in range(20)))
    assert {status for status, _ in results} == {200}
    answers = [answer for _, answer in results]
    assert all(answer == answers[0] for answer in answers)
    assert set(answers[0]) == {"threadId", "messageId", "queued"}
    assert len(await accepted(client_id=body["messageId"])) == 1
    await wait_until_async(lambda: _transcribed(body["messageId"]))
    assert len(await user_steps(answers[0]["threadId"])) == 1


async def _transcribed(message_id: str) -> bool:
    rows = await accepted(client_id=message_id)
    return bool(rows) and rows[0].state == AcceptedMessage.State.TRANSCRIBED


async def test_twenty_concurrent_identical_socket_sends_are_one_record(engine_server, make_user):
    user = make_user()
    client = await signed_in(engine_server, user)
    await client.start()
    first = await client.send("open the thread")
    message = {"message": {"id": str(uuid.uuid4()), "output": "same id, twenty times"}}
    answers = await asyncio.gather(*(client.call("client_message", message) for _ in range(20)))
    assert all(answer == answers[0] for answer in answers) and answers[0]["threadId"] == first["threadId"]
    assert len(await accepted(client_id=message["message"]["id"])) == 1
    await wait_until_async(lambda: _transcribed(message["message"]["id"]))
    await client.disconnect()


async def test_a_send_is_refused_cleanly(engine_server, make_user):
    owner, other = make_user(), make_user()
    token, other_token = await api_token(owner), await api_token(other)
    status, answer = await post_send(
        engine_server, token, {"messageId": str(uuid.uuid4()), "message": "mine"}
    )
    assert status == 200
    body = {"threadId": answer["threadId"], "messageId": str(uuid.uuid4()), "message": "let me in"}
    assert (await post_send(engine_server, other_token, body))[0] == 404
    assert (await post_send(engine_server, token, {**body, "threadId": str(uuid.uuid4())}))[0] == 404
    status, errors = await post_send(engine_server, token, {"messageId": "not-a-uuid", "message": 5})
    assert status == 400 and set(errors) == {"messageId"}
    status, errors = await post_send(engine_server, token, {"messageId": str(uuid.uuid4())})
    assert status == 400 and "message" in errors
    reused = {"threadId": answer["threadId"], "messageId": answer["messageId"], "message": "different text"}
    assert (await post_send(engine_server, token, reused))[0] == 409
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{engine_server.url}/api/chat/send", json=body) as response,
    ):
        assert response.status in (401, 403)
    assert len(await accepted(author=other)) == 0


async def test_http_sends_reach_every_socket_of_the_thread_and_queue_behind_a_running_turn(
    engine_server, make_user
):
    user = make_user()
    token = await api_token(user)
    watcher = await signed_in(engine_server, user)
    await watcher.start()
    opened = await watcher.send("!slow 0.1\nthe first turn takes a little while to stream")
    thread_id = opened["threadId"]
    await watcher.wait_event("stream_token")

    status, answer = await post_send(
        engine_server,
        token,
        {"threadId": thread_id, "messageId": str(uuid.uuid4()), "message": "from the API"},
    )
    assert status == 200 and answer["queued"] is True
    # On the bus before the answer: the watching socket sees it.
    await watcher.wait_for(
        lambda c: any(e["messageId"] == answer["messageId"] for e in c.named("chat-user-message"))
    )
    row = (await accepted(client_id=answer["messageId"]))[0]
    assert row.state == AcceptedMessage.State.PENDING and row.queued is True
    await wait_until_async(lambda: _transcribed(answer["messageId"]))
    steps = await user_steps(thread_id)
    assert [s.metadata["acceptedIds"] for s in steps] == [[opened["messageId"]], [answer["messageId"]]]
    await watcher.wait_text("Echo #2: from the API", timeout=15)
    await watcher.disconnect()


def _engine_pids(server) -> list[int]:
    found = subprocess.run(
        ["pgrep", "-P", str(server.process.pid), "-f", "echo_process"], capture_output=True, text=True
    ).stdout.split()
    return [int(pid) for pid in found]


async def test_killing_the_engine_right_after_a_200_loses_nothing(engine_server, make_user):
    user = make_user()
    token = await api_token(user)
    status, first = await post_send(
        engine_server, token, {"messageId": str(uuid.uuid4()), "message": "!slow 0.2\nstart a long turn now"}
    )
    assert status == 200
    thread_id = first["threadId"]
    await wait_until_async(lambda: _transcribed(first["messageId"]))
    sends = [
        {"threadId": thread_id, "messageId": str(uuid.uuid4()), "message": f"answered 200 #{i}"}
        for i in range(3)
    ]
    for body in sends:
        status, answer = await post_send(engine_server, token, body)
        assert status == 200 and answer["queued"] is True
    for pid in _engine_pids(engine_server):
        os.kill(pid, signal.SIGKILL)
    for body in sends:
        await wait_until_async(functools.partial(_transcribed, body["messageId"]), timeout=20)
    ids = [i for s in await user_steps(thread_id) for i in s.metadata["acceptedIds"]]
    assert sorted(ids) == sorted([first["messageId"], *(b["messageId"] for b in sends)])
    assert len(ids) == len(set(ids))
    thread = await Thread.objects.aget(pk=thread_id)
    assert thread.owner_id == user.pk


async def get_json(server, token: str, path: str) -> dict[str, Any]:
    async with (
        aiohttp.ClientSession(headers={"Authorization": f"Token {token}"}) as http,
        http.get(f"{server.url}{path}") as response,
    ):
        assert response.status == 200
        body: dict[str, Any] = await response.json()
        return body


async def test_a_send_during_a_turn_is_pending_in_bootstrap_until_its_user_step_lands(
    engine_server, make_user
):
    token = await api_token(make_user())
    status, first = await post_send(
        engine_server,
        token,
        {"messageId": str(uuid.uuid4()), "message": "!slow 0.15\nkeep the engine busy a while"},
    )
    thread_id = first["threadId"]
    await wait_until_async(lambda: _transcribed(first["messageId"]))
    status, second = await post_send(
        engine_server,
        token,
        {"threadId": thread_id, "messageId": str(uuid.uuid4()), "message": "wait for me"},
    )
    assert status == 200 and second["queued"] is True

    during = await get_json(engine_server, token, f"/api/threads/{thread_id}/bootstrap/")
    assert [p["id"] for p in during["pending"]] == [second["messageId"]]
    assert second["messageId"] not in [
        i for e in during["entries"] for i in e["metadata"].get("acceptedIds", [])
    ]

    await wait_until_async(lambda: _transcribed(second["messageId"]), timeout=20)
    after = await get_json(engine_server, token, f"/api/threads/{thread_id}/bootstrap/")
    assert after["pending"] == []
    users = [e for e in after["entries"] if e["type"] == "user_message"]
    assert [u["metadata"]["acceptedIds"] for u in users] == [[first["messageId"]], [second["messageId"]]]
    assert users[-1]["id"] == str(AcceptedMessage.key(uuid.UUID(thread_id), uuid.UUID(second["messageId"])))
