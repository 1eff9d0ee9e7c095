"""``kill -9`` of the server during a 20-client run loses no acknowledged message and duplicates
no step, as the database says once everything has settled after a restart, for both kinds
of app.

Two daphne processes on PostgreSQL and a private redis-server, behind the fault proxy
(``tests/support/cluster.py``), once with a hooks-API app (``tests.apps.lifecycle_app``) and
once with the engine runtime (the default app, the echo engine). Every user reaches process A
through the proxy. 20 clients, each its own user, session and chat thread, send in a closed
loop (send, wait for the ack, wait for the reply, send the next; every third round two sends
back to back, the second queued behind the first's turn); every message id whose ack came
back is recorded: the ack is the server's promise that the send is accepted.

After a warm-up A is killed with SIGKILL while sends are in every state (being accepted,
mid-turn, queued, answered). The proxy routes to B; each client reconnects there with its
same sessionId and carries on for a while, resending (same message id, as the web client's
outbox does) the send whose ack the kill swallowed. A is started again on its port and the
proxy takes it back once it serves. When the sends have stopped and every accepted send has
settled, the database must show, per thread:

- every acknowledged message id has its ``AcceptedMessage`` row, in its thread, with its
  text, and the thread has no row the client was not told about (nothing lost, nothing
  invented);
- each accepted send is carried by exactly one user step, or is marked failed with a reason;
- the steps' ``seq`` are unique; each send is answered at most once (the echo engine and the
  lifecycle app name the message text in their reply, and each client's texts are unique),
  exactly once when its outcome is ``replied``; any other outcome is ``error``, the turn the
  kill cut, closed by the one error step of the thread (the server's "server stopped"
  notice); with the hooks-API app ``on_message`` ran at most once per text.

On the wire: every send acked and answered on a socket that stayed up had its reply there.
"""

import asyncio
import contextlib
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest
from asgiref.sync import sync_to_async

from tests.support.client import ChatClient
from tests.support.cluster import (
    Cluster,
    all_settled,
    assert_each_send_transcribed_once,
    start_cluster,
    thread_record,
)
from tests.support.waiting import settle, wait_until_async
from threads_app.models import AcceptedMessage

pytestmark = [
    pytest.mark.fault,
    pytest.mark.two_process,  # skipped without PostgreSQL and Redis (tests/conftest.py)
    pytest.mark.django_db(transaction=True),
]

CLIENTS = 20
WARM_UP = 1.5  # seconds of traffic before the kill
AFTER_KILL = 2.0  # seconds during which the clients start new rounds after the kill
# ... and at most this much longer for a client with no send acked since its reconnect yet
# (on a loaded machine the reconnect itself can take most of AFTER_KILL).
AFTER_KILL_GRACE = 8.0
ACK_WAIT = 15.0  # an ack (a committed row) slower than this on a live socket is a failure
SEND_WAIT = 30.0  # for an ack, across drops and resends
REPLY_WAIT = 15.0  # the engine answers a send to a dead box owner once the box is claimed
RECONNECT_WAIT = 15.0
SETTLE_WAIT = 30.0
# A server's handler of a send whose socket dropped may still be at work (a repeated message
# id waits up to 2 s for the first request's answer, then hands the send over, through a dead
# owner's mailbox at worst): it gets this long after the last drop before the database is read.
LATE_HANDLERS = 6.0
SERVER_STOPPED = "server stopped"  # in the error step that closes a turn cut by a process death

T = TypeVar("T")


@pytest.fixture(params=["hooks", "engine"])
def cluster(request, server_factory, private_redis, fault_proxy, tmp_path):
    stage = start_cluster(server_factory, private_redis, fault_proxy, request.param, tmp_path)
    yield stage  # the test closes its clients (``cluster.close()``)
    stage.a.stop()
    stage.b.stop()


def answered_texts(kind: str, outputs: Iterable[str]) -> list[str]:
    """The message texts that these assistant outputs answer. The lifecycle app answers each
    send alone (``echo: <text>``); the echo engine answers a turn (``Echo #N: <text>``), and
    a turn may carry several queued sends, their texts joined by a blank line."""
    texts: list[str] = []
    for output in outputs:
        if kind == "hooks" and output.startswith("echo: "):
            texts.append(output.removeprefix("echo: "))
        elif kind == "engine" and output.startswith("Echo #"):
            texts.extend(output.split(": ", 1)[-1].split("\n\n"))
    return texts


class Dropped(Exception):
    """The client's socket went away (its server died, or closed it) while it waited."""


@dataclass
class LoadClient:
    """One user's tab: a closed loop of sends over one session, which survives the kill."""

    index: int
    kind: str
    client: ChatClient
    acked: dict[str, str] = field(default_factory=dict)  # message id -> text, as acked
    refused: list[dict[str, Any]] = field(default_factory=list)  # acks that carried an error
    thread_id: str = ""
    state: str = "idle"  # what it waits for now: "ack", "reply" or "idle"
    queued: int = 0  # sends whose ack said they wait behind a turn
    resent: int = 0  # sends repeated (same id) because the ack was lost with the socket
    reconnects: int = 0
    last_drop: float = 0.0
    acked_after_reconnect: int = 0
    replied_on_wire: int = 0
    rounds_cut: int = 0  # rounds whose replies were left to the database: the socket dropped
    replies_late: list[str] = field(default_factory=list)  # no reply in time on a live socket
    cut_after_reply: int = 0  # sends closed with an error although their reply was written

    def connected(self) -> bool:
        return self.client.sio is not None and bool(self.client.sio.connected)

    async def while_connected(self, awaitable: Awaitable[T], timeout: float) -> T:
        """Await ``awaitable``, unless the socket drops first (``Dropped``) or ``timeout``
        passes (``TimeoutError``): a pending socket.io call does not end with its socket."""
        task = asyncio.ensure_future(awaitable)
        deadline = time.monotonic() + timeout
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=0.05)
                if done:
                    break
                if not self.connected():
                    raise Dropped
                if time.monotonic() > deadline:
                    raise TimeoutError
            try:
                return task.result()
            except Exception:
                if not self.connected():
                    raise Dropped from None
                raise
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

    async def reconnect(self) -> None:
        """The same session (same sessionId) connects again through the proxy, retrying
        while no server takes the connection."""
        self.reconnects += 1
        self.last_drop = time.monotonic()
        deadline = time.monotonic() + RECONNECT_WAIT
        while True:
            if self.client.sio is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self.client.sio.disconnect(), 2)
            self.client.sio = None
            try:
                await self.client.start()
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.1)

    async def deliver(self, text: str, message_id: str) -> dict[str, Any]:
        """Send until acked: a send whose ack was lost with the socket goes again, with the
        same message id, once the session has reconnected."""
        self.state = "ack"
        deadline = time.monotonic() + SEND_WAIT
        attempts = 0
        while True:
            if not self.connected():
                await self.reconnect()
            self.resent += attempts > 0
            attempts += 1
            try:
                return await self.while_connected(self.client.send(text, message_id), ACK_WAIT)
            except Dropped:
                if time.monotonic() > deadline:
                    raise

    async def accepted(self, text: str) -> bool:
        """Deliver one new send; record it if its ack accepts it."""
        message_id = str(uuid.uuid4())
        answer = await self.deliver(text, message_id)
        if "error" in answer:
            self.refused.append(answer)
            return False
        assert answer["messageId"] == message_id, answer
        assert self.thread_id in ("", answer["threadId"]), (self.thread_id, answer)
        self.thread_id = answer["threadId"]
        self.acked[message_id] = text
        self.queued += bool(answer.get("queued"))
        self.acked_after_reconnect += self.reconnects > 0
        return True

    async def run(self, stop_at: Callable[[], float]) -> None:
        """Rounds until ``stop_at()``: one send, or (every third round) two back to back, so
        that the second waits behind the first's turn; then the replies to the round."""
        n = 0
        rounds = 0
        while time.monotonic() < stop_at() or (
            self.acked_after_reconnect == 0 and time.monotonic() < stop_at() + AFTER_KILL_GRACE
        ):
            socket = self.reconnects
            texts = []
            for _ in range(2 if rounds % 3 == 2 else 1):
                text = f"c{self.index} m{n}"
                n += 1
                if await self.accepted(text):
                    texts.append(text)
            rounds += 1
            if socket != self.reconnects:
                # The socket dropped during the round. A send acked before the drop may have
                # been answered (or its turn cut) while no socket was there, and a send acked
                # only when resent may have begun its turn on A, which then cut it: the
                # database says what became of these. On to the next round.
                self.rounds_cut += 1
                continue
            self.state = "reply"
            try:
                await self.while_connected(
                    self.client.wait_for(
                        lambda c, sent=tuple(texts): set(sent) <= set(answered_texts(self.kind, c.texts())),
                        60,
                    ),
                    REPLY_WAIT,
                )
                self.replied_on_wire += len(texts)
            except Dropped:
                self.rounds_cut += 1  # as above
                await self.reconnect()
            except TimeoutError:
                self.replies_late.extend(texts)
        self.state = "idle"


@sync_to_async
def accepted_rows(message_ids: list[str]) -> dict[str, tuple[str, str]]:
    """``message id -> (thread id, text)`` of the AcceptedMessage rows of these ids."""
    return {
        str(client_id): (str(thread_id), text)
        for client_id, thread_id, text in AcceptedMessage.objects.filter(
            client_id__in=message_ids
        ).values_list("client_id", "thread_id", "text")
    }


async def test_kill_9_under_load_loses_no_acked_send_and_duplicates_no_step(cluster: Cluster, make_user):
    users = [make_user() for _ in range(CLIENTS)]
    clients = await asyncio.gather(*(cluster.client(user) for user in users))  # all on A
    await asyncio.gather(*(c.start() for c in clients))
    load = [LoadClient(i, cluster.kind, c) for i, c in enumerate(clients)]

    stop_at = float("inf")
    started = time.monotonic()
    runs = [asyncio.create_task(lc.run(lambda: stop_at)) for lc in load]

    # Warm-up: every client has had sends answered; then A dies with sends in every state.
    await asyncio.sleep(WARM_UP)
    await wait_until_async(lambda: _all_replied_once(load), timeout=10)
    at_the_kill = Counter(lc.state for lc in load)
    acked_before = sum(len(lc.acked) for lc in load)
    cluster.a.kill()  # SIGKILL: no shutdown code runs, A's claims and heartbeat stay behind
    killed_at = time.monotonic()
    cluster.route_to(cluster.b)
    stop_at = killed_at + AFTER_KILL

    async def restart_a() -> float:
        """A again, on its port; the proxy takes it back once it serves."""
        await asyncio.to_thread(cluster.a.restart, kill=True)
        cluster.proxy.set_backends([cluster.b.port, cluster.a.port])
        return time.monotonic() - killed_at

    restarted = asyncio.create_task(restart_a())
    try:
        done, pending = await asyncio.wait(
            runs, timeout=AFTER_KILL + AFTER_KILL_GRACE + SEND_WAIT + REPLY_WAIT + RECONNECT_WAIT
        )
        sends_ended_at = time.monotonic()
        for run in pending:
            run.cancel()
    finally:
        restarted_in = await restarted  # A is up (and will be stopped) whatever happened
    assert not pending, "a client's loop hung"
    for run in done:
        run.result()  # a client's failure (no reconnect, no ack on a live socket) fails here

    # Everything accepted settles: answered, closed with an error, or failed with a reason.
    threads = [lc.thread_id for lc in load]

    async def everything_settled() -> bool:
        return all([await all_settled(t) for t in threads])

    await wait_until_async(everything_settled, timeout=SETTLE_WAIT, every=0.25)
    settled_in = time.monotonic() - sends_ended_at
    await cluster.close()
    # Before asserting that nothing was answered twice: the late handlers have their moment.
    await settle(max(lc.last_drop for lc in load) + LATE_HANDLERS - time.monotonic())

    outcomes: Counter[str] = Counter()
    for lc in load:
        record = await thread_record(lc.thread_id)
        _check_thread(cluster, lc, record, await accepted_rows(list(lc.acked)))
        for state, outcome, failure in record["accepted"].values():
            outcomes[f"{state}/{outcome or failure}"] += 1

    # The kill hit every client (all were on A), and every client carried on after it.
    assert all(lc.reconnects >= 1 for lc in load), [lc.reconnects for lc in load]
    assert all(lc.acked_after_reconnect >= 1 for lc in load), [lc.acked_after_reconnect for lc in load]
    assert all(lc.refused == [] for lc in load), [lc.refused for lc in load if lc.refused]
    # On a socket that stayed up, every reply came.
    late = [text for lc in load for text in lc.replies_late]
    assert not late, f"replies not seen on a live socket within {REPLY_WAIT} s: {late}"

    acked = sum(len(lc.acked) for lc in load)
    print(
        f"\n[{cluster.kind}] {acked} sends acked ({acked_before} before the kill, "
        f"{sum(lc.queued for lc in load)} queued), outcomes {dict(outcomes)}, "
        f"{sum(lc.cut_after_reply for lc in load)} of the errors after a written reply; "
        f"at the kill waiting for {dict(at_the_kill)}; {sum(lc.replied_on_wire for lc in load)} replies "
        f"seen on the wire, {sum(lc.rounds_cut for lc in load)} rounds left to the database; "
        f"{sum(lc.resent for lc in load)} resent, {sum(lc.reconnects for lc in load)} reconnects; "
        f"sends for {sends_ended_at - started:.1f} s, A served again {restarted_in:.1f} s after "
        f"the kill, all settled {settled_in:.1f} s after the sends"
    )


async def _all_replied_once(load: list[LoadClient]) -> bool:
    return all(lc.replied_on_wire >= 1 for lc in load)


def _check_thread(
    cluster: Cluster, lc: LoadClient, record: dict[str, Any], rows: dict[str, tuple[str, str]]
) -> None:
    who = f"client {lc.index}, thread {lc.thread_id}"
    # Nothing lost: every acked id has its row, in the client's thread, with its text; and
    # the thread has no send the client was not told about.
    lost = sorted(set(lc.acked) - set(rows))
    assert not lost, f"{who}: acked sends without an AcceptedMessage row: {lost}"
    for message_id, (thread_id, text) in rows.items():
        assert (thread_id, text) == (lc.thread_id, lc.acked[message_id]), (who, message_id)
    assert set(record["accepted"]) == set(lc.acked), (who, set(record["accepted"]) ^ set(lc.acked))

    # Each accepted send transcribed once (or failed with a reason: all_settled checked it).
    assert_each_send_transcribed_once(record)
    seqs = [step.seq for step in record["steps"]]
    assert len(seqs) == len(set(seqs)), (who, seqs)

    # Each send answered at most once; exactly once when its outcome says it was replied.
    answered = Counter(answered_texts(cluster.kind, record["replies"]))
    twice = {text: n for text, n in answered.items() if n > 1}
    assert not twice, f"{who}: answered more than once: {twice}"
    assert set(answered) <= set(lc.acked.values()), (who, set(answered) - set(lc.acked.values()))
    for message_id, (state, outcome, failure) in record["accepted"].items():
        text = lc.acked[message_id]
        if state == AcceptedMessage.State.FAILED:
            assert answered[text] == 0, (who, text, failure)
        elif outcome == AcceptedMessage.Outcome.REPLIED:
            assert answered[text] == 1, (who, text, outcome)
        else:
            # The only other ending here: a turn cut by the kill, closed with an error. Its
            # reply may be in the transcript already (A wrote it, then died before recording
            # that the turn had ended); it is there once at most, as checked above.
            assert outcome == AcceptedMessage.Outcome.ERROR, (who, text, outcome)
            lc.cut_after_reply += answered[text]

    # The kill cut at most one turn of this thread: at most one error step, the server's notice.
    assert len(record["errors"]) <= 1, (who, record["errors"])
    assert all(SERVER_STOPPED in error for error in record["errors"]), (who, record["errors"])
    cut = [m for m, (_s, o, _f) in record["accepted"].items() if o == AcceptedMessage.Outcome.ERROR]
    assert bool(cut) == bool(record["errors"]), (who, cut, record["errors"])

    if cluster.kind == "hooks":  # on_message ran at most once per send, once per replied send
        ran = Counter(c["content"] for c in cluster.hooks(lc.client.session_id, "on_message"))
        assert all(n == 1 for n in ran.values()), (who, ran)
        assert set(answered) <= set(ran), (who, set(answered) - set(ran))
