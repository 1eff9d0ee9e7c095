"""Nothing lost, nothing doubled: faults injected for real, for both kinds of app.

Each test runs two daphne processes on PostgreSQL and a private redis-server, reached through
a TCP proxy the test controls (``tests/support/cluster.py``), once with a hooks-API app
(``tests.apps.lifecycle_app``) and once with the engine runtime (the default app, the echo
engine). The faults: a socket closed, sent an invalid frame or gone silent mid-reply; an ack
lost and the message resent; Redis stopped and restarted mid-chat; ``kill -9`` and ``SIGTERM``
of the process running the reply with sends queued; frames after a close. The assertions, in
the database and on the wire: every accepted send answered exactly once or marked failed with
a reason, no duplicate step or reply, ``on_chat_start`` / ``on_chat_end`` once per session, no
session left on a dead socket, the next reply soon after the fault.
"""

import asyncio
import contextlib
import time
import uuid
from typing import Any

import aiohttp
import pytest
from asgiref.sync import sync_to_async

from chatproject.servers import SERVERS
from sessions_app.models import ServerProcess, SocketSession
from tests.support.client import ChatClient, signed_in
from tests.support.cluster import (
    Cluster,
    all_settled,
    assert_each_send_transcribed_once,
    sessions_on_dead_sockets,
    start_cluster,
    thread_record,
)
from tests.support.waiting import wait_until, wait_until_async
from threads_app.models import Box, Thread

pytestmark = [
    pytest.mark.fault,
    pytest.mark.two_process,  # skipped without PostgreSQL and Redis (tests/conftest.py)
    pytest.mark.django_db(transaction=True),
]


@pytest.fixture(params=["hooks", "engine"])
def cluster(request, server_factory, private_redis, fault_proxy, tmp_path):
    stage = start_cluster(server_factory, private_redis, fault_proxy, request.param, tmp_path)
    yield stage  # each test closes its clients (``cluster.close()``)
    stage.a.stop()
    stage.b.stop()


@pytest.fixture(params=[(kind, server) for server in SERVERS for kind in ("hooks", "engine")], ids="-".join)
def cluster_on_each_server(request, server_factory, private_redis, fault_proxy, tmp_path):
    """``cluster`` for both kinds of app under daphne and under uvicorn processes: for the
    faults whose handling is the server's (SIGTERM)."""
    kind, server = request.param
    stage = start_cluster(server_factory, private_redis, fault_proxy, kind, tmp_path, server=server)
    yield stage
    stage.a.stop()
    stage.b.stop()


async def started(cluster: Cluster, user: Any) -> ChatClient:
    client = await cluster.client(user)
    await client.start()
    return client


async def reconnect(client: ChatClient) -> None:
    """The same session (same sessionId) connects again, through the proxy."""
    if client.sio is not None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.sio.disconnect(), 2)
    client.sio = None
    await client.start()


async def first_thread(cluster: Cluster, client: ChatClient) -> str:
    """Open the thread with one short exchange; returns its id."""
    answer = await client.send("hello")
    await client.wait_for(lambda c: any(cluster.replies_to("hello")(t) for t in c.texts()), timeout=15)
    thread_id: str = answer["threadId"]
    return thread_id


def streamed(client: ChatClient) -> int:
    return len(client.named("stream_token"))


# --- the socket a reply streams to ------------------------------------------------------------


async def _break_socket(cluster, client: ChatClient, how: str) -> None:
    if how == "close":
        assert client.sio is not None
        await client.sio.disconnect()
    elif how == "invalid_frame":
        assert client.sio is not None
        await client.sio.eio.ws.send_str("x")  # not an Engine.IO packet
    else:  # ping loss: the path goes silent, the server's heartbeat gives up after 1 + 2 s
        cluster.proxy.half_open()


@pytest.mark.parametrize("how", ["close", "invalid_frame", "ping_loss"])
async def test_a_reply_survives_its_socket(cluster, make_user, how):
    user = make_user()
    client = await started(cluster, user)
    thread_id = await first_thread(cluster, client)
    watcher = None
    if cluster.kind == "engine":  # a second tab on the thread, on the other process, sees it all
        watcher = await signed_in(cluster.b, user)
        cluster.clients.append(watcher)
        await watcher.start(thread_id=thread_id)
        await watcher.wait_event("resume_thread")
    answer = await client.send(cluster.slow_message(40))
    await client.wait_for(lambda c: streamed(c) >= 3, timeout=10)
    await _break_socket(cluster, client, how)

    # The run finishes and is transcribed whole.
    await wait_until_async(lambda: all_settled(thread_id), timeout=20)
    record = await thread_record(thread_id)
    assert record["accepted"][answer["messageId"]][:2] == ("transcribed", "replied")
    final = record["replies"][-1]
    assert record["errors"] == [] and record["replies"].count(final) == 1
    assert final.count("t") >= 40 if cluster.kind == "hooks" else final.endswith("w39")
    assert_each_send_transcribed_once(record)
    if watcher is not None:
        await watcher.wait_for(
            lambda c: final in [m["output"] for m in c.named("update_message")], timeout=10
        )
        tokens = "".join(t["token"] for t in watcher.named("stream_token"))
        assert tokens == final  # every token, in order

    # The session reconnects and carries on.
    cluster.proxy.heal()
    cluster.route_to(cluster.b)
    await wait_until_async(lambda: _socket_released(client.session_id), timeout=10)
    await reconnect(client)
    await client.send("after")
    await client.wait_for(lambda c: any(cluster.replies_to("after")(t) for t in c.texts()), timeout=10)
    assert len(cluster.hooks(client.session_id, "on_chat_start")) == (1 if cluster.kind == "hooks" else 0)
    await cluster.close()


@sync_to_async
def _socket_released_sync(session_id: str) -> bool:
    return SocketSession.objects.filter(pk=session_id, socket_channel="").exists()


async def _socket_released(session_id: str) -> bool:
    return await _socket_released_sync(session_id)


# --- a lost ack, the same message resent ----------------------------------------------------------


async def test_a_resent_message_is_answered_once(cluster, make_user):
    client = await started(cluster, make_user())
    thread_id = await first_thread(cluster, client)
    answers = {}
    for round_ in range(10):
        message_id = str(uuid.uuid4())
        text = f"bounce {round_}"
        # The send goes out and the connection drops before the ack can come back.
        assert client.sio is not None
        await client.sio.emit("client_message", {"message": {"id": message_id, "output": text}})
        await asyncio.sleep(0.02)
        cluster.proxy.reset()
        await reconnect(client)
        answers[text] = await client.send(text, message_id)  # the client's outbox resends it
        again = await client.send(text, message_id)
        assert again == answers[text] and again["messageId"] == message_id
    await wait_until_async(lambda: all_settled(thread_id), timeout=30)
    record = await thread_record(thread_id)
    assert_each_send_transcribed_once(record)
    for text in answers:
        assert sum(cluster.replies_to(text)(r) for r in record["replies"]) == 1, (text, record["replies"])
    if cluster.kind == "hooks":
        ran = [c["content"] for c in cluster.hooks(client.session_id, "on_message")]
        assert sorted(ran) == sorted(["hello", *answers])  # one on_message per message id
    await cluster.close()


# --- Redis stops and comes back mid-chat -----------------------------------------------------------


async def test_sends_accepted_while_redis_is_down_are_answered_once_it_is_back(cluster, make_user):
    user = make_user()
    client = await started(cluster, user)
    thread_id = await first_thread(cluster, client)
    token = await _token(user)
    cluster.redis.stop()
    sent = []
    for i in range(3):
        answer = await client.send(f"while down {i}")
        assert "error" not in answer and answer["messageId"]
        sent.append(f"while down {i}")
    if cluster.kind == "engine":
        # The HTTP door of the other process: its box owner is unreachable, the send is
        # accepted all the same (no 500) and stays pending for recovery.
        for i in range(2):
            status, body = await _http_send(cluster.b.url, token, thread_id, f"http while down {i}")
            assert status == 200, body
            sent.append(f"http while down {i}")
    await asyncio.sleep(1)
    cluster.redis.start()
    await wait_until_async(lambda: all_settled(thread_id), timeout=30)
    record = await thread_record(thread_id)
    assert_each_send_transcribed_once(record)
    assert all(state == "transcribed" for state, _o, _f in record["accepted"].values())
    answered = [part for reply in record["replies"] for part in reply.split(": ", 1)[-1].split("\n\n")]
    for text in sent:
        assert answered.count(text) == 1, (text, record["replies"])
    await cluster.close()


async def _token(user) -> str:
    from tests.support.client import api_token

    return await api_token(user)


async def _http_send(base_url: str, token: str, thread_id: str, text: str) -> tuple[int, object]:
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{base_url}/api/chat/send",
            json={"threadId": thread_id, "messageId": str(uuid.uuid4()), "message": text},
            headers={"Authorization": f"Token {token}"},
        ) as response,
    ):
        return response.status, await response.json(content_type=None)


# --- the process running the reply dies, or is told to stop --------------------------------------------


async def _reply_with_two_queued(
    cluster, client: ChatClient
) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
    thread_id = await first_thread(cluster, client)
    running = await client.send(cluster.slow_message(60))
    await client.wait_for(lambda c: streamed(c) >= 3, timeout=10)
    queued = [await client.send(f"queued {i}") for i in range(2)]
    assert all(q["queued"] for q in queued)
    return thread_id, running, queued


async def test_kill_9_of_the_running_process(cluster, make_user):
    client = await started(cluster, make_user())
    thread_id, running, queued = await _reply_with_two_queued(cluster, client)
    cluster.a.kill()
    killed_at = time.monotonic()
    cluster.route_to(cluster.b)
    await reconnect(client)

    # The cut turn ends with a visible error; the queued sends are answered, once each.
    await wait_until_async(lambda: all_settled(thread_id), timeout=15)
    settled_in = time.monotonic() - killed_at
    record = await thread_record(thread_id)
    state, outcome, _ = record["accepted"][running["messageId"]]
    assert (state, outcome) == ("transcribed", "error")
    assert any("server stopped" in e for e in record["errors"])
    for i, q in enumerate(queued):
        assert record["accepted"][q["messageId"]][:2] == ("transcribed", "replied")
        assert sum(f"queued {i}" in r for r in record["replies"]) == 1
    assert_each_send_transcribed_once(record)
    assert settled_in < 8, settled_in

    # The next reply comes at once.
    sent_at = time.monotonic()
    await client.send("next")
    await client.wait_for(lambda c: any(cluster.replies_to("next")(t) for t in c.texts()), timeout=10)
    assert time.monotonic() - sent_at < 3
    assert len(cluster.hooks(client.session_id, "on_chat_start")) == (1 if cluster.kind == "hooks" else 0)
    await cluster.close()


async def test_sigterm_of_the_running_process(cluster_on_each_server, make_user):
    cluster = cluster_on_each_server
    client = await started(cluster, make_user())
    thread_id, running, queued = await _reply_with_two_queued(cluster, client)
    cluster.route_to(cluster.b)
    a_address = await _address_of(cluster.a.process.pid)
    signalled = time.monotonic()
    cluster.a.terminate(wait=False)

    # The socket is closed by the server at once (the client need not wait for a ping).
    await wait_until(lambda: client.sio is None or not client.sio.connected, timeout=4)
    await reconnect(client)
    # The running reply finished within the grace period; the queued sends moved to B.
    await wait_until_async(lambda: all_settled(thread_id), timeout=20)
    record = await thread_record(thread_id)
    assert record["accepted"][running["messageId"]][:2] == ("transcribed", "replied")
    assert record["errors"] == []
    for i, q in enumerate(queued):
        assert record["accepted"][q["messageId"]][:2] == ("transcribed", "replied")
        assert sum(f"queued {i}" in r for r in record["replies"]) == 1
    assert_each_send_transcribed_once(record)
    assert cluster.a.process.wait(15) == 0
    assert time.monotonic() - signalled < 4 + 8
    # Its claims were released, its liveness row deleted.
    assert not await ServerProcess.objects.filter(address=a_address).aexists()
    assert not await Box.objects.filter(runtime_owner=a_address).aexists()
    assert not await Thread.objects.filter(runtime_owner=a_address).aexists()
    assert not await SocketSession.objects.filter(turn_owner=a_address).aexists()
    assert await sessions_on_dead_sockets() == []
    assert cluster.hooks(client.session_id, "on_chat_end") == []  # a restart does not end chats
    await cluster.close()


@sync_to_async
def _address_of_sync(pid: int) -> str:
    return ServerProcess.objects.filter(pid=pid).values_list("address", flat=True).get()


async def _address_of(pid: int) -> str:
    return await _address_of_sync(pid)


async def test_sessions_of_a_dead_process_expire_once(cluster, make_user):
    client = await started(cluster, make_user())
    await first_thread(cluster, client)
    other = await started(cluster, make_user())  # B must be running its sweeper: it has a socket
    cluster.route_to(cluster.b)
    await reconnect(other)
    cluster.a.kill()
    # The session's socket died with A: B's sweeper detaches it, it expires, on_chat_end once.
    await wait_until_async(lambda: _ended(client.session_id), timeout=20)
    assert await sessions_on_dead_sockets() == []
    if cluster.kind == "hooks":
        await wait_until(lambda: cluster.hooks(client.session_id, "on_chat_end"), timeout=5)
        await asyncio.sleep(1)
        assert len(cluster.hooks(client.session_id, "on_chat_end")) == 1
    await cluster.close()


# --- frames after a close --------------------------------------------------------------------------------


async def test_frames_after_a_close_are_ignored_and_the_session_still_ends(cluster, make_user):
    user = make_user()
    client = await started(cluster, user)
    await first_thread(cluster, client)
    assert client.sio is not None
    ws = client.sio.eio.ws
    await ws.send_str("1")  # Engine.IO close
    await ws.send_str("2")  # then a ping, after the close
    await ws.send_str('42["client_message",{"message":{"id":"' + str(uuid.uuid4()) + '","output":"late"}}]')
    await wait_until_async(lambda: _socket_released(client.session_id), timeout=10)
    # The session expires (SESSION_TIMEOUT 4 s) and ends once.
    await wait_until_async(lambda: _ended(client.session_id), timeout=20)
    if cluster.kind == "hooks":
        await wait_until(lambda: cluster.hooks(client.session_id, "on_chat_end"), timeout=5)
        assert len(cluster.hooks(client.session_id, "on_chat_end")) == 1
        assert "late" not in [c["content"] for c in cluster.hooks(client.session_id, "on_message")]
    await cluster.close()


@sync_to_async
def _ended_sync(session_id: str) -> bool:
    return not SocketSession.objects.filter(pk=session_id, ended=False).exists()


async def _ended(session_id: str) -> bool:
    return await _ended_sync(session_id)


# --- a connected socket while others come and go ---------------------------------------------------


async def _churn(cluster, users, stop: asyncio.Event) -> int:
    """Sockets of other users connect to B and leave, as fast as they can, until ``stop``."""
    rounds = 0
    clients = [await signed_in(cluster.b, u) for u in users]
    while not stop.is_set():
        await asyncio.gather(*(c.start() for c in clients))
        await asyncio.gather(*(c.disconnect() for c in clients))
        for c in clients:
            c.session_id = str(uuid.uuid4())
        rounds += 1
    return rounds


async def test_a_stream_across_processes_loses_nothing_while_other_sockets_churn(cluster, make_user):
    """The reply runs on A; the socket that shows it is on B, where 8 other sockets connect
    and leave all the time. Every token arrives once, in order, and the final message too."""
    user = make_user()
    others = [make_user() for _ in range(8)]
    client = await started(cluster, user)  # through the proxy, to A: A runs the box / the hooks
    thread_id = await first_thread(cluster, client)
    if cluster.kind == "engine":
        viewer = await signed_in(cluster.b, user)
        cluster.clients.append(viewer)
        await viewer.start(thread_id=thread_id)
        await viewer.wait_event("resume_thread")
        text = "!slow 0.01\n" + " ".join(f"w{i}" for i in range(400))
    else:
        viewer = client  # the session moves to B mid-turn; the hook keeps running on A
        text = "slowstream 400 0.01"
    stop = asyncio.Event()
    churn = asyncio.create_task(_churn(cluster, others, stop))
    await client.send(text)
    if cluster.kind == "hooks":
        await client.wait_for(lambda c: streamed(c) >= 5, timeout=10)
        cluster.route_to(cluster.b)
        client.events.clear()
        await reconnect(client)
    await wait_until_async(lambda: all_settled(thread_id), timeout=40)
    stop.set()
    rounds = await churn
    record = await thread_record(thread_id)
    final = record["replies"][-1]
    await viewer.wait_for(lambda c: final in [m["output"] for m in c.named("update_message")], timeout=10)
    tokens = [t["token"] for t in viewer.named("stream_token")]
    received = "".join(tokens)
    if cluster.kind == "engine":
        assert received == final  # no gap, no duplicate, in order
    else:  # after the move: one unbroken run up to the end
        assert received and final.endswith(received), (received[:80], final[-80:])
        numbers = [int(t.strip()[1:]) for t in tokens]
        assert numbers == list(range(numbers[0], 400))
    assert rounds >= 3
    await cluster.close()
