"""A process that stalls is not taken for dead: nothing it runs is answered twice or cut.

Two daphne processes on PostgreSQL and a private redis-server behind the fault proxy
(``tests/support/cluster.py``), for both kinds of app. Process A streams a reply with two sends
queued behind it and holds an idle session; B holds a session of its own (so its sweeper and
recovery loop run). A is ``SIGSTOP``ped for 3 s (more than ``PROCESS_DEAD_AFTER``, 2 s) and, in
a second case, for 3x the dead-after time, then ``SIGCONT``ed. A's database connections stay
open while it is stopped, so B renews its lease instead of taking its work
(``sessions_app.processes``). The assertions, in the database and in B's log: B took nothing
over, every send was answered exactly once, the cut-short reply was finished whole by A, no
session was ended, and the next reply comes at once.

The last test turns vouching off, so that a stop of 3x the dead-after time is a takeover: B
closes A's cut turn and answers its queued sends while A is stopped; when A wakes, fencing
tokens refuse everything it tries (``threads_app.fencing``): no step of A's after the
takeover (each step records its writer and token), each send answered once.

The last one detaches a stopped process's session, as a process that takes it for dead does:
awake, the stopped process attaches it again, so it does not expire behind its live socket.
"""

import asyncio
import contextlib
import signal
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from sessions_app.models import ServerProcess, SocketSession
from tests.support.client import ChatClient
from tests.support.cluster import (
    Cluster,
    all_settled,
    assert_each_send_transcribed_once,
    start_cluster,
    thread_record,
)
from tests.support.waiting import wait_until_async
from threads_app.models import Step

pytestmark = [
    pytest.mark.fault,
    pytest.mark.two_process,  # skipped without PostgreSQL and Redis (tests/conftest.py)
    pytest.mark.django_db(transaction=True),
]

DEAD_AFTER = 2.0  # the servers' PROCESS_DEAD_AFTER (the default)


@pytest.fixture(params=["hooks", "engine"])
def cluster(request, server_factory, private_redis, fault_proxy, tmp_path):
    stage = start_cluster(server_factory, private_redis, fault_proxy, request.param, tmp_path)
    yield stage
    for server in (stage.a, stage.b):
        with contextlib.suppress(ProcessLookupError):
            server.process.send_signal(signal.SIGCONT)  # never leave a stopped process behind
    stage.a.stop()
    stage.b.stop()


@sync_to_async
def _row_of(pid: int) -> ServerProcess:
    return ServerProcess.objects.filter(pid=pid).latest("started_at")


def _log_lines(path: Path, since: int) -> list[str]:
    return path.read_bytes()[since:].decode(errors="replace").splitlines()


async def _connected(cluster: Cluster, client: ChatClient) -> None:
    """The session on its socket again (the client gave up on a stopped server's pings)."""
    if client.sio is not None and client.sio.connected:
        return
    with contextlib.suppress(Exception):
        if client.sio is not None:
            await asyncio.wait_for(client.sio.disconnect(), 2)
    client.sio = None
    await client.start()


def _evidence(record: dict[str, Any], b_log: list[str], clients: list[ChatClient]) -> str:
    lines = ["sends (state, outcome, failure):"]
    lines += [f"  {key}: {value}" for key, value in record["accepted"].items()]
    lines.append("transcript:")
    lines += [f"  {s.seq} {s.type} {s.output[:80]!r}" for s in record["steps"]]
    lines.append("B's log after the pause began:")
    lines += [f"  {line}" for line in b_log[-60:]]
    for client in clients:
        lines.append(f"events of {client.session_id}:")
        lines += [f"  {name} {str(data)[:100]}" for name, data in client.events]
    return "\n".join(lines)


@pytest.mark.parametrize("pause", [3.0, 3 * DEAD_AFTER], ids=["3s", "3x-dead-after"])
async def test_a_stalled_process_keeps_its_work_and_answers_each_send_once(cluster, make_user, pause):
    user = make_user()
    cluster.route_to(cluster.a)
    client = await cluster.client(user)
    await client.start()
    answer = await client.send("hello")
    thread_id = answer["threadId"]
    await client.wait_for(lambda c: any(cluster.replies_to("hello")(t) for t in c.texts()), timeout=15)
    idle = await cluster.client(make_user())
    await idle.start()
    await idle.send("hello")
    await idle.wait_for(lambda c: any(cluster.replies_to("hello")(t) for t in c.texts()), timeout=15)
    cluster.route_to(cluster.b)
    on_b = await cluster.client(make_user())
    await on_b.start()
    await on_b.send("hello")
    await on_b.wait_for(lambda c: any(cluster.replies_to("hello")(t) for t in c.texts()), timeout=15)
    cluster.route_to(cluster.a)

    running = await client.send(cluster.slow_message(40))
    await client.wait_for(lambda c: len(c.named("stream_token")) >= 3, timeout=10)
    queued = [await client.send(f"queued {i}") for i in range(2)]
    assert all(q["queued"] for q in queued), queued

    b_log_start = cluster.b.log_path.stat().st_size
    cluster.a.process.send_signal(signal.SIGSTOP)
    await asyncio.sleep(pause)
    a_row = await _row_of(cluster.a.process.pid)  # read while A is still stopped
    cluster.a.process.send_signal(signal.SIGCONT)

    await _connected(cluster, client)
    await wait_until_async(lambda: all_settled(thread_id), timeout=30)
    record = await thread_record(thread_id)
    b_log = _log_lines(cluster.b.log_path, b_log_start)
    evidence = _evidence(record, b_log, [client])

    # Another process (B, or any other server on this database) vouched for A: its lease was
    # renewed while its own beats had stopped; nobody took its thread, turn or sends.
    assert a_row.beat_at is not None and a_row.heartbeat_at - a_row.beat_at > timedelta(seconds=1), (
        a_row.heartbeat_at,
        a_row.beat_at,
        evidence,
    )
    assert not any("died before answering" in line or "server stopped" in line for line in b_log), evidence
    # The reply that was streaming when A stopped was finished whole, by A; each queued send
    # was answered exactly once; nothing failed.
    assert record["accepted"][running["messageId"]][:2] == ("transcribed", "replied"), evidence
    assert record["errors"] == [], evidence
    final = next(r for r in record["replies"] if "w39" in r or r.count("t") >= 40)
    assert record["replies"].count(final) == 1, evidence
    assert final.endswith("w39") if cluster.kind == "engine" else final.count("t") >= 40, evidence
    for i, q in enumerate(queued):
        assert record["accepted"][q["messageId"]][:2] == ("transcribed", "replied"), evidence
        assert sum(f"queued {i}" in r for r in record["replies"]) == 1, evidence
    assert_each_send_transcribed_once(record)

    # No session was ended behind its live socket, and each was started once.
    assert not await SocketSession.objects.filter(pk=idle.session_id, ended=True).aexists()
    if cluster.kind == "hooks":
        for session in (client, idle, on_b):
            assert len(cluster.hooks(session.session_id, "on_chat_start")) == 1
            assert cluster.hooks(session.session_id, "on_chat_end") == []

    # The next reply comes at once (on the same session: its socket may have given up on A's
    # pings while A was stopped).
    await _connected(cluster, client)
    sent_at = time.monotonic()
    await client.send("next")
    await client.wait_for(lambda c: any(cluster.replies_to("next")(t) for t in c.texts()), timeout=10)
    assert time.monotonic() - sent_at < 3
    await _connected(cluster, idle)
    await idle.send("still here")
    await idle.wait_for(lambda c: any(cluster.replies_to("still here")(t) for t in c.texts()), timeout=10)
    await cluster.close()


# --- a stall that outlasts the lease: the takeover happens, and fencing keeps it safe ---------


@pytest.fixture(params=["hooks", "engine"])
def takeover(request, server_factory, private_redis, fault_proxy, tmp_path):
    """The same stage with vouching off (``PROCESS_STALL_LIMIT=0``): a process silent for
    longer than ``PROCESS_DEAD_AFTER`` is taken for dead while it is only stopped."""
    stage = start_cluster(
        server_factory, private_redis, fault_proxy, request.param, tmp_path, PROCESS_STALL_LIMIT="0"
    )
    yield stage
    for server in (stage.a, stage.b):
        with contextlib.suppress(ProcessLookupError):
            server.process.send_signal(signal.SIGCONT)
    stage.a.stop()
    stage.b.stop()


@sync_to_async
def _steps_of(thread_id: str) -> list[tuple[int, str, str, int | None, str]]:
    """(seq, type, writer, writer's token, output) of each step, in order."""
    return list(
        Step.objects.filter(thread_id=thread_id)
        .order_by("seq")
        .values_list("seq", "type", "writer", "writer_epoch", "output")
    )


async def _move(cluster: Cluster, client: ChatClient) -> None:
    """The client leaves its (stopped) server and connects again through the proxy."""
    with contextlib.suppress(Exception):
        if client.sio is not None:
            await asyncio.wait_for(client.sio.disconnect(), 2)
    client.sio = None
    await client.start()


async def test_a_process_taken_over_while_stopped_writes_nothing_after_and_each_send_is_answered_once(
    takeover, make_user
):
    cluster = takeover
    user = make_user()
    cluster.route_to(cluster.a)
    client = await cluster.client(user)
    await client.start()
    answer = await client.send("hello")
    thread_id = answer["threadId"]
    await client.wait_for(lambda c: any(cluster.replies_to("hello")(t) for t in c.texts()), timeout=15)

    running = await client.send(cluster.slow_message(40))
    await client.wait_for(lambda c: len(c.named("stream_token")) >= 3, timeout=10)
    queued = [await client.send(f"queued {i}") for i in range(2)]
    assert all(q["queued"] for q in queued), queued
    a_address = (await _row_of(cluster.a.process.pid)).address
    b_address = (await _row_of(cluster.b.process.pid)).address
    a_log_start = cluster.a.log_path.stat().st_size

    # A stops mid-reply; the client moves to B. With nobody vouching, B takes A's work over
    # while A is stopped: it closes the cut reply with an error and answers the queued sends.
    cluster.a.process.send_signal(signal.SIGSTOP)
    stopped_at = time.monotonic()
    try:
        cluster.route_to(cluster.b)
        await _move(cluster, client)
        await wait_until_async(lambda: all_settled(thread_id), timeout=40)
        await asyncio.sleep(max(0.0, 3 * DEAD_AFTER - (time.monotonic() - stopped_at)))
        at_wake = await _steps_of(thread_id)
        stopped_for = time.monotonic() - stopped_at
    finally:
        cluster.a.process.send_signal(signal.SIGCONT)

    # A wakes with its reply half streamed, its queued sends in memory and its engine's output
    # waiting in a pipe. Everything it tries now is refused; the reply would have ended ~3 s in.
    await asyncio.sleep(6)
    record = await thread_record(thread_id)
    after = await _steps_of(thread_id)
    a_log = _log_lines(cluster.a.log_path, a_log_start)
    evidence = (
        f"A={a_address} B={b_address} stopped for {stopped_for:.1f}s\nsteps at A's wake:\n"
        + "\n".join(f"  {s[:4]} {s[4][:60]!r}" for s in at_wake)
        + "\nsteps 6 s later:\n"
        + "\n".join(f"  {s[:4]} {s[4][:60]!r}" for s in after)
        + "\nA's log after the stop:\n"
        + "\n".join(f"  {line}" for line in a_log[-40:])
        + "\n"
        + _evidence(record, [], [client])
    )

    # The database: each step says who wrote it under which token. B wrote the takeover's
    # steps; A wrote nothing after it (the transcript is what it was when A woke).
    assert stopped_for > 3 * DEAD_AFTER, evidence
    assert any(writer == a_address for _, _, writer, _, _ in at_wake), evidence
    assert any(writer == b_address for _, _, writer, _, _ in at_wake), evidence
    assert after == at_wake, evidence
    first_of_b = min(seq for seq, _, writer, _, _ in after if writer == b_address)
    assert all(seq < first_of_b for seq, _, writer, _, _ in after if writer == a_address), evidence
    # A said that it lost the work (a warning per piece: the cut turn, each queued send); it
    # logged no error.
    lost = [line for line in a_log if "taken over" in line]
    assert 1 <= len(lost) <= 1 + len(queued), evidence
    assert not any(" ERROR " in line or "Traceback" in line for line in a_log), evidence

    # Every accepted send answered exactly once: the cut one closed by B with an error (its
    # reply never completed anywhere), each queued one replied to once.
    assert record["accepted"][running["messageId"]][:2] == ("transcribed", "error"), evidence
    assert not any("w39" in r or "t39" in r for r in record["replies"]), evidence
    assert sum(cluster.replies_to("hello")(r) for r in record["replies"]) == 1, evidence
    for i, q in enumerate(queued):
        assert record["accepted"][q["messageId"]][:2] == ("transcribed", "replied"), evidence
        assert sum(f"queued {i}" in r for r in record["replies"]) == 1, evidence
    assert_each_send_transcribed_once(record)
    if cluster.kind == "hooks":
        assert len(cluster.hooks(client.session_id, "on_chat_start")) == 1, evidence

    # The next reply comes at once, from B. Known defect, not yet understood: run after other
    # tests whose servers are still up (the whole suite), the engine case's socket to B drops
    # with a transport error about 5 s into the stop (``client.disconnects``); the tab then
    # connects again, as a page would, before the next send. The drops are in the evidence.
    if client.sio is None or not client.sio.connected:
        await _move(cluster, client)
    sent_at = time.monotonic()
    try:
        await client.send("next")
        await client.wait_for(lambda c: any(cluster.replies_to("next")(t) for t in c.texts()), timeout=10)
    except Exception as exc:
        drops = [(round(at - stopped_at, 1), reason) for at, reason in client.disconnects]
        raise AssertionError(
            f"{exc!r}; the client's drops (s after the stop, reason): {drops}\n"
            f"its last events: {client.events[-15:]}\n{evidence}"
        ) from exc
    assert time.monotonic() - sent_at < 3, evidence
    await cluster.close()


# --- a stall that outlasts the lease: sessions detached meanwhile are attached again ----------

SESSION_TIMEOUT = 6.0


@pytest.fixture(params=["hooks", "engine"])
def long_pings(request, server_factory, private_redis, fault_proxy, tmp_path):
    """Pings far apart: a client's socket outlives its server's stop."""
    stage = start_cluster(
        server_factory,
        private_redis,
        fault_proxy,
        request.param,
        tmp_path,
        SOCKETIO_PING_INTERVAL="25",
        SOCKETIO_PING_TIMEOUT="20",
        SESSION_TIMEOUT=str(SESSION_TIMEOUT),
    )
    yield stage
    for server in (stage.a, stage.b):
        with contextlib.suppress(ProcessLookupError):
            server.process.send_signal(signal.SIGCONT)
    stage.a.stop()
    stage.b.stop()


async def _socket_of(session_id: str) -> tuple[str, bool] | None:
    """(socket_channel, ended) of the session's record, None once it is deleted."""
    return await SocketSession.objects.filter(pk=session_id).values_list("socket_channel", "ended").afirst()


async def _detach(session_id: str) -> int:
    """What a process that takes the socket's process for dead does to its sessions
    (``records.detach_dead_sockets``): disconnected from now on, so they expire."""
    return await SocketSession.objects.filter(pk=session_id).aupdate(
        socket_channel="", socket_owner="", disconnected_at=timezone.now()
    )


async def test_a_session_detached_while_its_process_was_stopped_is_attached_again_and_lives_on(
    long_pings, make_user
):
    """While A is stopped past its lease, its socket's session is detached, as B does to the
    sockets of a process it takes for dead; it would then expire (``on_chat_end``, the record
    deleted) with its client still connected to A. A, awake, attaches it again: past the
    session timeout the session is live, on its first socket, and answers.

    The test detaches the session itself: in the whole suite, other processes on the database
    (the test runner's own, other tests' servers) vouch for a stopped A whose connections are
    open, so B would not take it for dead within a stop this short."""
    cluster = long_pings
    cluster.route_to(cluster.b)
    on_b = await cluster.client(make_user())
    await on_b.start()  # B's sweeper is running: it expires what stays detached
    cluster.route_to(cluster.a)
    idle = await cluster.client(make_user())
    await idle.start()
    await idle.send("hello")
    await idle.wait_for(lambda c: any(cluster.replies_to("hello")(t) for t in c.texts()), timeout=15)
    on_a = await _socket_of(idle.session_id)
    assert on_a is not None and on_a[0] and not on_a[1], on_a

    async def attached_again() -> bool:
        return await _socket_of(idle.session_id) == on_a

    cluster.a.process.send_signal(signal.SIGSTOP)
    try:
        await asyncio.sleep(DEAD_AFTER)  # A's beats lapse: longer than half the dead-after time
        assert await _detach(idle.session_id) == 1
    finally:
        cluster.a.process.send_signal(signal.SIGCONT)
    try:
        await wait_until_async(attached_again, timeout=10)
    except TimeoutError:
        raise AssertionError(
            f"not attached again 10 s after A woke: {await _socket_of(idle.session_id)} (on A: {on_a})"
        ) from None
    await asyncio.sleep(2 * SESSION_TIMEOUT)  # past the expiry it would have had, two sweeps of B

    record = await _socket_of(idle.session_id)
    evidence = (
        f"the record now: {record} (on A: {on_a})\n"
        f"the client's drops: {idle.disconnects}\nits events: {idle.events[-15:]}"
    )
    assert record == on_a, evidence
    assert idle.disconnects == [], evidence  # the same socket all along
    if cluster.kind == "hooks":
        assert len(cluster.hooks(idle.session_id, "on_chat_start")) == 1, evidence
        assert cluster.hooks(idle.session_id, "on_chat_end") == [], evidence
    await idle.send("still here")
    await idle.wait_for(lambda c: any(cluster.replies_to("still here")(t) for t in c.texts()), timeout=10)
    await cluster.close()
