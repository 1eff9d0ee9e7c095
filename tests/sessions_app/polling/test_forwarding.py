"""Polling without sticky sessions: two daphne processes on PostgreSQL and a private Redis,
for both kinds of app (the hooks-API test app and the engine runtime's default app).

- a polling session whose every request goes to the other process than the one before
  (``PollingClient`` alternating base URLs) completes turns, every event once and in order;
- python-socketio with default transports through a round-robin proxy: the handshake lands
  on one process and the upgrade WebSocket on the other, and the chat goes on;
- a polling client whose connections are cut reconnects and finds the thread whole.
"""

import asyncio
import contextlib
import json
import uuid
from collections import Counter
from typing import Any

import aiohttp
import pytest

from tests.support.client import ChatClient, user_cookie
from tests.support.cluster import (
    Cluster,
    all_settled,
    assert_each_send_transcribed_once,
    start_cluster,
    thread_record,
)
from tests.support.polling import PollingClient
from tests.support.waiting import wait_until_async

pytestmark = [
    pytest.mark.two_process,  # skipped without PostgreSQL and Redis (tests/conftest.py)
    pytest.mark.django_db(transaction=True),
]

WORDS = 20


@pytest.fixture(params=["hooks", "engine"])
def cluster(request, server_factory, private_redis, fault_proxy, tmp_path):
    stage = start_cluster(server_factory, private_redis, fault_proxy, request.param, tmp_path)
    yield stage
    stage.a.stop()
    stage.b.stop()


def streaming_message(cluster: Cluster, n: int) -> str:
    """A message whose reply streams ``WORDS`` tokens."""
    if cluster.kind == "hooks":
        return f"stream {WORDS}"
    return " ".join(f"m{n}w{i}" for i in range(WORDS))


def assistant_outputs(events: list[tuple[str, Any]]) -> dict[str, str]:
    """The last output of each assistant message, by id."""
    outputs: dict[str, str] = {}
    for name, data in events:
        if name in ("new_message", "update_message") and data.get("type") == "assistant_message":
            outputs[data["id"]] = data["output"]
    return outputs


async def test_a_polling_session_alternating_processes_loses_and_repeats_nothing(cluster, make_user):
    user = make_user()
    cookie = await user_cookie(cluster.a.url, user)
    async with PollingClient([cluster.a.url, cluster.b.url], cookie) as poll:
        await poll.connect_namespace({"sessionId": str(uuid.uuid4()), "clientType": "webapp"})
        await poll.emit("connection_successful", None)
        for n in range(3):
            message_id = str(uuid.uuid4())
            text = streaming_message(cluster, n)
            await poll.emit("client_message", {"message": {"id": message_id, "output": text}}, ack_id=n)
            await poll.events_until(lambda _events: n in poll.acks, timeout=30)  # noqa: B023 - awaited here
            assert "error" not in json.dumps(poll.acks[n]), poll.acks[n]
            before = len(assistant_outputs(poll.events))

            def answered(events: list[tuple[str, Any]], before: int = before) -> bool:
                ended = any(name == "task_end" for name, _ in events[-3:])
                return ended and len(assistant_outputs(events)) > before

            await poll.events_until(answered, timeout=30)
        await wait_until_async(lambda: all_settled(thread_id(poll)), timeout=20)

    urls = Counter(poll.served_by)
    assert urls[cluster.a.url] > 3 and urls[cluster.b.url] > 3, urls
    outputs = assistant_outputs(poll.events)
    tokens: dict[str, list[str]] = {}
    for name, data in poll.events:
        if name == "stream_token":
            tokens.setdefault(data["id"], []).append(data["token"])
    streamed = [reply_id for reply_id in outputs if reply_id in tokens]
    assert len(streamed) == 3, (outputs, tokens.keys())
    for reply_id in streamed:
        # Every token once, in order: together they are the reply.
        assert "".join(tokens[reply_id]).strip() == outputs[reply_id].strip(), (
            tokens[reply_id],
            outputs[reply_id],
        )
        assert len(tokens[reply_id]) == len(set(tokens[reply_id])) or cluster.kind == "engine", tokens[
            reply_id
        ]
    record = await thread_record(thread_id(poll))
    assert_each_send_transcribed_once(record)
    assert sorted(record["replies"]) == sorted(outputs.values()), (record["replies"], outputs)
    news = [data["id"] for name, data in poll.events if name == "new_message"]
    assert len(news) == len(set(news)), f"a message shown twice: {news}"


def thread_id(poll: PollingClient) -> str:
    for name, data in poll.events:
        if name == "first_interaction":
            value: str = data["thread_id"]
            return value
    raise AssertionError(f"no first_interaction in {poll.events}")


async def test_a_session_polled_on_one_process_upgrades_on_the_other(cluster, make_user):
    cookie = await user_cookie(cluster.a.url, make_user())
    async with PollingClient([cluster.a.url], cookie) as poll, aiohttp.ClientSession() as http:
        await poll.connect_namespace({"sessionId": str(uuid.uuid4()), "clientType": "webapp"})
        await poll.drain()
        waiting = asyncio.ensure_future(poll.get_raw())  # a GET waiting on A during the probe
        await asyncio.sleep(0.2)
        url = f"{cluster.b.url}/ws/socket.io/?EIO=4&transport=websocket&sid={poll.sid}"
        async with http.ws_connect(url, headers={"Cookie": cookie}) as ws:
            await ws.send_str("2probe")
            assert await _frame(ws) == "3probe"
            status, body = await asyncio.wait_for(waiting, 10)
            assert status == 200 and body.split("\x1e")[-1] == "6", (status, body)  # released by a noop
            await ws.send_str("5")
            # From here on the session is this socket on B; its consumer still runs on A.
            await ws.send_str('42["connection_successful"]')
            text = streaming_message(cluster, 0)
            await ws.send_str(
                "420" + json.dumps(["client_message", {"message": {"id": str(uuid.uuid4()), "output": text}}])
            )
            events: list[tuple[str, Any]] = []
            ack: Any = None
            while not (
                ack is not None
                and len(assistant_outputs(events)) >= (2 if cluster.kind == "hooks" else 1)
                and events[-1][0] == "task_end"
            ):
                frame = await _frame(ws)
                if frame == "2":
                    await ws.send_str("3")
                elif frame.startswith("430"):
                    ack = json.loads(frame[3:])
                elif frame.startswith("42"):
                    name, *args = json.loads(frame[2:])
                    events.append((name, args[0] if args else None))
        assert "error" not in json.dumps(ack), ack
        # The upgraded session is no longer polled.
        status, _body = await poll.get_raw()
        assert status == 400
    outputs = assistant_outputs(events)
    tokens = [data["token"] for name, data in events if name == "stream_token"]
    assert "".join(tokens).strip() in [o.strip() for o in outputs.values()], (tokens, outputs)
    await wait_until_async(lambda: all_settled(ack[0]["threadId"]), timeout=20)
    record = await thread_record(ack[0]["threadId"])
    assert_each_send_transcribed_once(record)


async def _frame(ws: aiohttp.ClientWebSocketResponse) -> str:
    message = await asyncio.wait_for(ws.receive(), 20)
    assert message.type == aiohttp.WSMsgType.TEXT, message
    text: str = message.data
    return text


async def test_a_default_client_through_a_round_robin_proxy_upgrades_and_chats(cluster, make_user):
    cookie = await user_cookie(cluster.a.url, make_user())
    cluster.proxy.set_backends([cluster.a.port, cluster.b.port])
    client = ChatClient(cluster.url, cookie, transports=None)
    cluster.clients.append(client)
    await client.start()
    assert client.sio is not None
    await asyncio.sleep(0.5)
    assert client.sio.transport() == "websocket"
    answer = await client.send(streaming_message(cluster, 0))
    assert "error" not in answer, answer
    await wait_until_async(lambda: all_settled(answer["threadId"]), timeout=20)
    await client.wait_for(lambda c: c.named("task_end") and c.events[-1][0] == "task_end", timeout=20)
    outputs = assistant_outputs(client.events)
    tokens = [t["token"] for t in client.named("stream_token")]
    assert tokens and "".join(tokens).strip() in [o.strip() for o in outputs.values()], (tokens, outputs)
    await cluster.close()


async def test_a_dropped_polling_client_reconnects_and_finds_the_thread_whole(cluster, make_user):
    user = make_user()
    cookie = await user_cookie(cluster.a.url, user)
    client = ChatClient(cluster.url, cookie, transports=("polling",))
    cluster.clients.append(client)
    await client.start()
    answer = await client.send("hello")
    thread = answer["threadId"]
    await client.wait_for(lambda c: any(cluster.replies_to("hello")(t) for t in c.texts()), timeout=15)
    slow = await client.send(cluster.slow_message(30))
    await client.wait_for(lambda c: len(c.named("stream_token")) >= 3, timeout=15)
    cluster.proxy.drop()  # every connection of the client cut mid-reply
    with contextlib.suppress(Exception):
        await asyncio.wait_for(client.disconnect(), 5)
    await wait_until_async(lambda: all_settled(thread), timeout=30)
    # Read before the tab comes back: resume_thread shows the thread as it was when the tab
    # resumed, before on_chat_resume (the hooks app's says "welcome back") adds to it.
    record = await thread_record(thread)

    # The tab comes back (a new session on the thread, through either process) by polling.
    again = ChatClient(cluster.url, cookie, transports=("polling",))
    cluster.clients.append(again)
    await again.start(thread_id=thread)
    resumed = (await again.wait_event("resume_thread", timeout=15))[0]
    outputs = [s["output"] for s in resumed["steps"] if s["type"] == "assistant_message"]
    assert record["accepted"][slow["messageId"]][:2] == ("transcribed", "replied"), record["accepted"]
    assert outputs == record["replies"], (outputs, record["replies"])
    assert len(set(outputs)) == len(outputs) and len(outputs) >= 2, outputs  # each reply once
    assert_each_send_transcribed_once(record)
    await again.send("after")
    await again.wait_for(lambda c: any(cluster.replies_to("after")(t) for t in c.texts()), timeout=15)
    await cluster.close()
