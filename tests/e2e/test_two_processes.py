"""Two daphne processes sharing PostgreSQL and Redis: a session moves between them mid-chat.

Server A and server B run the lifecycle test app on the same test database and channel
layer and append to one hook log, so "once per session" can be counted across processes.
Skipped unless ``DATABASE_URL`` and ``REDIS_URL`` are set (SQLite and the in-memory layer
cannot be shared between processes).
"""

import asyncio
import os
import time
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
import socketio
from asgiref.sync import sync_to_async

from sessions_app.models import SocketSession
from tests.support.client import ChatClient, signed_in, user_cookie
from tests.support.server import LiveServer
from tests.support.waiting import wait_until

pytestmark = [
    pytest.mark.two_process,  # skipped without PostgreSQL and Redis (tests/conftest.py)
    pytest.mark.django_db(transaction=True),
]

# Short enough that A's expiry timer for a session that moved to B fires during a test.
SESSION_TIMEOUT = 3.0
BURST = 300


@dataclass
class Pair:
    a: LiveServer
    b: LiveServer

    def hooks(self, session: str, hook: str) -> list[dict[str, Any]]:
        return self.a.hooks(session, hook)  # one log shared by both


@pytest.fixture(scope="module")
def pair(server_factory):
    hook_log = server_factory.workdir / f"pair-hooks-{os.urandom(3).hex()}.jsonl"
    env = {"SESSION_TIMEOUT": str(SESSION_TIMEOUT)}
    a = server_factory.start(hook_log=hook_log, **env)
    b = server_factory.start(hook_log=hook_log, **env)
    yield Pair(a, b)
    a.stop()
    b.stop()


async def move(client: ChatClient, to: LiveServer) -> None:
    """Drop the socket and reconnect, same sessionId, to the other server."""
    await client.disconnect()
    client.base_url = to.url
    client.events.clear()
    await client.start()


async def settled(read, expected: int, timeout: float) -> None:
    """Poll an async count until it equals ``expected`` (the caller asserts afterwards)."""
    for _ in range(int(timeout / 0.1)):
        if await read() == expected:
            return
        await asyncio.sleep(0.1)


def hook_contents(pair: Pair, session: str) -> list[tuple[str, int]]:
    return [(c["content"], c["pid"]) for c in pair.hooks(session, "on_message")]


async def test_reconnect_to_other_process_restores_the_session(pair, make_user):
    client = await signed_in(pair.a, make_user())
    await client.start()
    await client.wait_text("greeting")
    await client.send("set color red")
    await client.wait_text("set color")

    await move(client, pair.b)
    await client.wait_event("task_end")
    await client.send("get color")
    await client.wait_text("color=red")

    starts = pair.hooks(client.session_id, "on_chat_start")
    assert [c["pid"] for c in starts] == [pair.a.process.pid]
    assert "greeting" not in client.texts()
    assert pair.hooks(client.session_id, "on_chat_resume") == []
    assert hook_contents(pair, client.session_id) == [
        ("set color red", pair.a.process.pid),
        ("get color", pair.b.process.pid),
    ]
    await client.disconnect()


async def test_hook_in_a_reaches_socket_on_b_and_turns_never_overlap(pair, make_user):
    client = await signed_in(pair.a, make_user())
    await client.start()
    await client.wait_text("greeting")

    began = time.monotonic()
    await client.send("sleep 2")
    await wait_until(lambda: hook_contents(pair, client.session_id))
    await move(client, pair.b)
    # B sees A's claim on the turn in the database.
    await client.wait_for(lambda c: c.named("task_start") or c.named("task_end"))
    assert next(name for name, _ in client.events if name in ("task_start", "task_end")) == "task_start"

    await client.send("sleep 1")  # arrives at B while A's sleep still runs
    sent = time.monotonic() - began
    assert sent < 1.5, "too slow to overlap the two turns; the check below would prove nothing"
    await client.wait_for(lambda c: c.texts().count("slept") >= 1, timeout=10)
    first = time.monotonic() - began
    await client.wait_for(lambda c: c.texts().count("slept") >= 2, timeout=10)
    second = time.monotonic() - began

    # A's reply crossed to B's socket. Had B's turn overlapped A's, B's "slept" would have
    # come at about sent + 1 s < 2.5 s; it came a full second after A's turn ended.
    assert first >= 2.0
    assert second >= 3.0, (sent, first, second)
    assert second - first >= 0.8, (sent, first, second)
    assert hook_contents(pair, client.session_id) == [
        ("sleep 2", pair.a.process.pid),
        ("sleep 1", pair.b.process.pid),
    ]
    await client.wait_event("task_end")
    await client.disconnect()


async def test_stop_on_b_cancels_the_turn_running_in_a(pair, make_user):
    client = await signed_in(pair.a, make_user())
    await client.start()
    await client.wait_text("greeting")

    began = time.monotonic()
    await client.send("sleep 4")
    await wait_until(lambda: hook_contents(pair, client.session_id))
    await move(client, pair.b)
    await client.wait_event("task_start")
    await client.emit("stop")
    await client.wait_text("Task manually stopped.")
    stopped_at = time.monotonic()

    # A released the turn at once: B can run the next message long before the sleep would end.
    await client.send("after stop")
    await client.wait_text("echo: after stop", timeout=10)
    assert time.monotonic() - stopped_at < 2.5  # not stopped: about 3.3 s

    await wait_until(lambda: time.monotonic() - began > 4.5, timeout=6)
    assert client.texts().count("Task manually stopped.") == 1
    assert "slept" not in client.texts()
    assert len(pair.hooks(client.session_id, "on_stop")) == 1
    assert hook_contents(pair, client.session_id) == [
        ("sleep 4", pair.a.process.pid),
        ("after stop", pair.b.process.pid),
    ]
    record = await SocketSession.objects.aget(pk=client.session_id)
    assert record.turn_owner == ""
    await client.disconnect()


async def test_clear_on_b_ends_the_session_once_across_processes(pair, make_user):
    client = await signed_in(pair.a, make_user())
    await client.start()
    await client.wait_text("greeting")
    await client.send("hello")
    await client.wait_text("echo: hello")

    await move(client, pair.b)
    await client.wait_event("task_end")
    # A's expiry timer for the drop fires now; B holds the session, so nothing ends.
    await asyncio.sleep(SESSION_TIMEOUT + 0.5)
    assert pair.hooks(client.session_id, "on_chat_end") == []

    await client.emit("clear_session")
    await client.emit("clear_session")
    await wait_until(lambda: pair.hooks(client.session_id, "on_chat_end"))
    await asyncio.sleep(1.5)  # a sweep of either process, and the second clear, have had their chance
    ends = pair.hooks(client.session_id, "on_chat_end")
    assert [c["pid"] for c in ends] == [pair.b.process.pid]
    assert not await SocketSession.objects.filter(pk=client.session_id).aexists()
    await client.disconnect()


async def test_idle_sockets_outlive_the_redis_read_timeout(pair, make_user):
    """redis-py 8 reads time out after 5 s by default, as long as channels-redis blocks in
    BZPOPMIN: whichever coroutine held the layer's receive (a socket's consumer, or the turn
    mailbox, which logs and retries) died every ~5 s. The pair has been up far longer than
    that by now, so the log check catches the mailbox too."""
    clients = [await signed_in(server, make_user()) for server in (pair.a, pair.b, pair.a)]
    for client in clients:
        await client.start()
        await client.wait_text("greeting")
    await asyncio.sleep(6)
    for client in clients:
        assert client.sio is not None and client.sio.connected
        await client.send("still here")
        await client.wait_text("echo: still here")
        await client.disconnect()
    # Nothing failed in either process during this module's tests so far.
    for server in (pair.a, pair.b):
        log = server.log_path.read_text(errors="replace")
        assert "Traceback" not in log, log[-3000:]


@sync_to_async
def connected_count(session_ids: list[str]) -> int:
    return SocketSession.objects.filter(pk__in=session_ids).exclude(socket_channel="").count()


async def test_300_simultaneous_disconnects_leave_nothing_behind(server_factory, make_user):
    import redis.asyncio as redis

    server = server_factory.start()
    user = make_user()
    cookie = await user_cookie(server.url, user)
    session_ids = [str(uuid.uuid4()) for _ in range(BURST)]
    group_keys = [f"asgi:group:session.{uuid.UUID(s).hex}" for s in session_ids]
    clients = [socketio.AsyncClient(reconnection=False) for _ in session_ids]
    gate = asyncio.Semaphore(50)

    async def open_one(sio: socketio.AsyncClient, session_id: str) -> None:
        async with gate:
            await sio.connect(
                server.url,
                headers={"Cookie": cookie},
                auth={"sessionId": session_id, "clientType": "webapp"},
                transports=["websocket"],
                socketio_path="/ws/socket.io",
                wait_timeout=20,
            )

    store = redis.from_url(os.environ["REDIS_URL"])
    try:
        opening = time.monotonic()
        await asyncio.wait_for(
            asyncio.gather(*(open_one(c, s) for c, s in zip(clients, session_ids, strict=True))), 60
        )
        assert all(c.connected for c in clients)
        opened = time.monotonic() - opening

        async def groups_left() -> int:
            return int(await store.exists(*group_keys))

        # Every socket joined its session's group (this also checks the key naming).
        await settled(groups_left, BURST, timeout=15)
        assert await groups_left() == BURST
        assert await connected_count(session_ids) == BURST

        began = time.monotonic()
        await asyncio.wait_for(asyncio.gather(*(c.disconnect() for c in clients)), 30)
        client_side = time.monotonic() - began
        await settled(lambda: connected_count(session_ids), 0, timeout=30)
        await settled(groups_left, 0, timeout=10)
        server_side = time.monotonic() - began
        print(
            f"\n{BURST} sockets opened in {opened:.2f}s; disconnects: clients done in {client_side:.2f}s, server done in {server_side:.2f}s"
        )

        log = server.log_path.read_text(errors="replace")
        assert "MaxConnectionsError" not in log, log[-4000:]
        assert "Traceback" not in log, log[-4000:]
        assert await groups_left() == 0
        assert await connected_count(session_ids) == 0
        assert server.alive()
    finally:
        await asyncio.gather(*(c.disconnect() for c in clients if c.connected), return_exceptions=True)
        await store.aclose()
        server.stop()


def tokens_of(client: ChatClient, message_id: str) -> list[str]:
    return [t["token"] for t in client.named("stream_token") if t["id"] == message_id]


async def test_a_reply_streams_to_the_threads_tab_on_the_other_process_once_while_the_sender_moves(
    pair, make_user
):
    """A hooks-API turn shows its reply on every tab of the thread: a second tab, on the other
    process, gets each token and the finished message live, once; the sending tab, moved to
    that process mid-turn, gets the rest of its reply once too (the thread's bus leaves out
    the sending session's own socket)."""
    user = make_user()
    sender = await signed_in(pair.a, user)
    await sender.start()
    await sender.wait_text("greeting")
    thread_id = (await sender.send("before"))["threadId"]
    await sender.wait_text("echo: before")
    other_tab = ChatClient(pair.b.url, sender.cookie)
    await other_tab.start(thread_id=thread_id)
    await other_tab.wait_text("welcome back")
    other_tab.events.clear()

    try:
        await sender.send("slowstream 8 0.4")
        await sender.wait_event("stream_token", count=2)
        (reply_id,) = {t["id"] for t in sender.named("stream_token")}
        await move(sender, pair.b)  # the turn goes on in A; its socket is now on B
        want = [f"t{i} " for i in range(8)]

        def finished(client: ChatClient) -> bool:
            return any(m["id"] == reply_id and not m["streaming"] for m in client.named("update_message"))

        def evidence() -> str:
            return f"other tab got {other_tab.events}\nsender got (after its move) {sender.events}"

        for client in (other_tab, sender):
            try:
                await client.wait_for(finished, timeout=30)
            except TimeoutError:
                raise AssertionError(f"the reply did not finish on every tab\n{evidence()}") from None
        assert tokens_of(other_tab, reply_id) == want, evidence()
        assert [m["id"] for m in other_tab.named("update_message")].count(reply_id) == 1, evidence()
        got = tokens_of(sender, reply_id)
        assert got == want[len(want) - len(got) :], f"the sender's tokens repeat or skip\n{evidence()}"
        assert [m["id"] for m in sender.named("update_message")].count(reply_id) == 1, evidence()
        assert [c["content"] for c in pair.hooks(sender.session_id, "on_message")] == [
            "before",
            "slowstream 8 0.4",
        ]
    finally:
        await sender.disconnect()
        await other_tab.disconnect()
