"""A turn forwarded to the thread's owner is one trace across two real processes.

Two daphnes (``tests/support/cluster.py``) with traces on export their spans to one file
(``OTEL_TRACES_EXPORTER=file``: JSON lines, ``chatproject.tracing_export``), each span with its
process's pid. A tab's first send makes process A the thread's owner; the tab then reconnects
through the proxy to process B, whose next send is forwarded to A through the mailbox. The
spans read back: B's socket event is the root; A serves the mailbox request as its child, runs
the turn under it, and writes the reply under the turn; both processes' database and Redis
calls (the official instrumentations) are in that trace. A hooks-API turn runs where its
socket is; what crosses processes is the thread's bus: a second tab on the other process is
told of the send (``chat-user-message``) in the sender's trace.

Sampling: with a ratio sampler of 1 on one process and 0 on the other, a forwarded send
follows its sender's decision in the owner: kept whole across both, or recorded nowhere, and
no trace in either file is a half one (a span whose parent is missing, or a root that is not
a request or a socket event). So does a hooks-API turn's reply on its way over the thread's
bus to a tab on the other process: delivered there under the turn when the sender kept the
trace, recorded by neither process when it dropped it.
"""

import json
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sessions_app.models import ServerProcess
from tests.e2e.test_cluster import has_reply, move_to_the_other_process, socket_pid
from tests.e2e.test_two_processes import tokens_of
from tests.support.client import ChatClient, signed_in, user_cookie
from tests.support.cluster import Cluster, start_cluster
from tests.support.server import LiveServer
from tests.support.waiting import wait_until
from threads_app.models import Thread

pytestmark = [
    pytest.mark.two_process,  # skipped without PostgreSQL and Redis (tests/conftest.py)
    pytest.mark.django_db(transaction=True),
]


def read_spans(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def listing(spans: list[dict[str, Any]]) -> str:
    return "\n".join(
        f"pid={s['pid']} {s['name']} {s['kind']} trace={s['trace_id']} span={s['span_id']} parent={s['parent_id']}"
        for s in spans
    )


def descends_from(span: dict[str, Any], ancestor: dict[str, Any], spans: list[dict[str, Any]]) -> bool:
    by_id = {s["span_id"]: s for s in spans}
    current: dict[str, Any] | None = span
    while current is not None and current["parent_id"] is not None:
        if current["parent_id"] == ancestor["span_id"]:
            return True
        current = by_id.get(current["parent_id"])
    return False


@pytest.fixture
def traced_cluster(request, server_factory, private_redis, fault_proxy, tmp_path):
    """Both processes with traces on, exporting to one file; the engine runtime unless the
    test asks for another kind of app (``indirect`` parametrization)."""
    kind = getattr(request, "param", "engine")
    spans_file = tmp_path / "spans.jsonl"
    stage = start_cluster(
        server_factory,
        private_redis,
        fault_proxy,
        kind,
        tmp_path,
        OTEL_ENABLED="1",
        OTEL_TRACES_EXPORTER="file",
        OTEL_TRACES_FILE=str(spans_file),
        OTEL_BSP_SCHEDULE_DELAY="100",  # the SDK's batch delay, ms: spans land soon
    )
    # Both processes' sockets are reachable through the proxy (it picks one per connection).
    stage.proxy.set_backends([stage.a.port, stage.b.port])
    yield stage, spans_file
    stage.a.stop()
    stage.b.stop()


async def test_a_forwarded_turn_is_one_trace_across_the_two_processes(traced_cluster, make_user):
    cluster, spans_file = traced_cluster
    tab = ChatClient(cluster.url, await user_cookie(cluster.url, make_user()))
    try:
        await tab.start()
        first = await tab.send("first")
        await tab.wait_for(has_reply("Echo #1: first"), timeout=30)
        owner = await socket_pid(tab)  # the first send's process runs the thread
        _old, sender = await move_to_the_other_process(tab)
        await tab.wait_event("task_end")
        second = await tab.send("second")
        assert second["threadId"] == first["threadId"]
        await tab.wait_for(has_reply("Echo #2: second"), timeout=30)
    finally:
        await tab.disconnect()
    assert owner is not None and sender is not None and owner != sender

    def sent_from_b() -> list[dict[str, Any]]:
        return [
            s
            for s in read_spans(spans_file)
            if s["name"] == "socket client_message"
            and s["pid"] == sender
            and s["attributes"].get("tether.thread") == first["threadId"]
        ]

    def forwarded_turn_exported() -> bool:
        sends = sent_from_b()
        spans = read_spans(spans_file)
        return bool(sends) and any(
            s["name"] == "turn"
            and s["trace_id"] == sends[-1]["trace_id"]
            and s.get("attributes", {}).get("tether.outcome")
            for s in spans
        )

    await wait_until(forwarded_turn_exported, timeout=15)
    every = read_spans(spans_file)
    send = sent_from_b()[-1]
    assert_one_forwarded_trace([s for s in every if s["trace_id"] == send["trace_id"]], send, owner, sender)


def assert_one_forwarded_trace(
    trace: list[dict[str, Any]], send: dict[str, Any], owner: int, sender: int
) -> None:
    """``trace`` is the whole of a send forwarded from ``sender`` to the thread's ``owner``:
    the sender's socket event is the root; the owner's mailbox request, turn and reply hang
    from it; both processes' database and Redis calls are in it."""
    evidence = listing(trace)
    assert send["pid"] == sender and send["parent_id"] is None and send["kind"] == "SERVER", evidence
    requests = [s for s in trace if s["name"] == "mailbox runtime.submit"]
    assert len(requests) == 1, evidence
    request = requests[0]
    assert request["pid"] == owner and request["parent_id"] == send["span_id"], evidence
    turns = [s for s in trace if s["name"] == "turn"]
    assert len(turns) == 1, evidence
    turn = turns[0]
    assert turn["pid"] == owner and turn["parent_id"] == request["span_id"], evidence
    assert turn["attributes"]["tether.outcome"] == "replied", evidence
    replies = [s for s in trace if s["name"] == "reply"]
    assert replies and all(r["pid"] == owner and descends_from(r, turn, trace) for r in replies), evidence

    # The instrumentations' calls: the sender's acceptance (its INSERT), the owner's steps.
    def calls(system: str) -> list[dict[str, Any]]:
        return [s for s in trace if s["kind"] == "CLIENT" and s["attributes"].get("db.system") == system]

    database, redis_calls = calls("postgresql"), calls("redis")
    assert any(d["pid"] == sender and d["parent_id"] == send["span_id"] for d in database), evidence
    assert any(d["pid"] == owner and descends_from(d, turn, trace) for d in database), evidence
    # Redis: the sender's channel-layer send of the request, the owner's of the turn's events.
    assert any(r["pid"] == sender for r in redis_calls), evidence
    assert any(r["pid"] == owner and descends_from(r, turn, trace) for r in redis_calls), evidence


@pytest.mark.parametrize("traced_cluster", ["hooks"], indirect=True)
async def test_a_hooks_turn_and_its_bus_delivery_to_the_other_process_are_one_trace(
    traced_cluster, make_user
):
    cluster, spans_file = traced_cluster
    user = make_user()
    tab = await signed_in(cluster.a, user)
    watcher = await signed_in(cluster.b, user)
    try:
        await tab.start()
        first = await tab.send("first")
        await tab.wait_for(lambda c: any(cluster.replies_to("first")(t) for t in c.texts()), timeout=30)
        await watcher.start(thread_id=first["threadId"])
        await watcher.wait_event("resume_thread")
        await tab.send("second")
        await tab.wait_for(lambda c: any(cluster.replies_to("second")(t) for t in c.texts()), timeout=30)
        await watcher.wait_for(lambda c: any(m.get("text") == "second" for m in c.named("chat-user-message")))
    finally:
        await tab.disconnect()
        await watcher.disconnect()
    sender, receiver = cluster.a.process.pid, cluster.b.process.pid

    def delivered_to_b() -> list[dict[str, Any]]:
        return [
            s
            for s in read_spans(spans_file)
            if s["name"] == "thread_bus deliver"
            and s["pid"] == receiver
            and s["attributes"].get("tether.event") == "chat-user-message"
        ]

    def exported() -> bool:
        """The delivery to B and the turn of the same trace (the send's) are both written."""
        deliveries = delivered_to_b()
        return bool(deliveries) and any(
            s["name"] == "turn"
            and s["trace_id"] == deliveries[-1]["trace_id"]
            and s["attributes"].get("tether.outcome")
            for s in read_spans(spans_file)
        )

    await wait_until(exported, timeout=15)
    every = read_spans(spans_file)
    delivery = delivered_to_b()[-1]
    trace = [s for s in every if s["trace_id"] == delivery["trace_id"]]
    evidence = listing(trace)
    sends = [s for s in trace if s["name"] == "socket client_message"]
    assert len(sends) == 1 and sends[0]["pid"] == sender, evidence
    send = sends[0]
    assert descends_from(delivery, send, trace), evidence
    turns = [s for s in trace if s["name"] == "turn"]
    assert len(turns) == 1 and turns[0]["pid"] == sender and turns[0]["parent_id"] == send["span_id"], (
        evidence
    )
    assert turns[0]["attributes"]["tether.kind"] == "hooks", evidence
    database = [s for s in trace if s["attributes"].get("db.system") == "postgresql"]
    assert any(descends_from(d, turns[0], trace) for d in database), evidence


@sync_to_async
def thread_owner_pid(thread_id: str) -> int | None:
    """The pid of the process running the thread (its runtime's owner), from the database."""
    address = Thread.objects.get(pk=thread_id).runtime_owner
    pid: int | None = ServerProcess.objects.filter(address=address).values_list("pid", flat=True).first()
    return pid


def starts_a_trace(span: dict[str, Any]) -> bool:
    """A socket event or an HTTP request (Django's span), what a trace may start at here."""
    attributes = span["attributes"]
    is_request = "http.method" in attributes or "http.request.method" in attributes
    return span["kind"] == "SERVER" and (span["name"] == "socket client_message" or is_request)


def ratio_sampler(ratio: str) -> dict[str, str]:
    return {"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": ratio}


@pytest.fixture
def sampling_cluster(request, server_factory, private_redis, fault_proxy, tmp_path):
    """Processes with traces on, exporting to one file, A keeping every trace it starts
    (ratio 1) and B none (ratio 0): which process a trace starts in decides it. The engine
    runtime unless the test asks for another kind of app (``indirect`` parametrization)."""
    spans_file = tmp_path / "spans.jsonl"
    stage = start_cluster(
        server_factory,
        private_redis,
        fault_proxy,
        getattr(request, "param", "engine"),
        tmp_path,
        a_settings=ratio_sampler("1"),
        b_settings=ratio_sampler("0"),
        OTEL_ENABLED="1",
        OTEL_TRACES_EXPORTER="file",
        OTEL_TRACES_FILE=str(spans_file),
        OTEL_BSP_SCHEDULE_DELAY="100",
    )
    yield stage, spans_file
    stage.a.stop()
    stage.b.stop()


async def forwarded_send(cluster: Cluster, user: Any, owner: LiveServer, sender: LiveServer) -> str:
    """A tab's first send on ``owner`` (which then runs the thread), its second from a socket
    on ``sender``, forwarded to ``owner`` through the mailbox; the thread's id once both are
    answered."""
    cluster.route_to(owner)
    tab = ChatClient(cluster.url, await user_cookie(cluster.url, user))
    try:
        await tab.start()
        first = await tab.send("first")
        await tab.wait_for(has_reply("Echo #1: first"), timeout=30)
        cluster.route_to(sender)
        await tab.disconnect()
        tab.events.clear()
        await tab.start()
        await tab.wait_event("task_end")
        assert await socket_pid(tab) == sender.process.pid
        second = await tab.send("second")
        assert second["threadId"] == first["threadId"]
        await tab.wait_for(has_reply("Echo #2: second"), timeout=30)
    finally:
        await tab.disconnect()
    assert await thread_owner_pid(first["threadId"]) == owner.process.pid
    return str(first["threadId"])


def every_span_after_both_exit(cluster: Cluster, spans_file: Path) -> list[dict[str, Any]]:
    """Stop both processes and read the file: their span processors flush as they exit
    (SIGTERM; no SIGKILL), so every span either recorded is in it."""
    cluster.a.terminate(wait=False)
    cluster.b.terminate(wait=False)
    exits = [cluster.a.terminate(timeout=30), cluster.b.terminate(timeout=30)]
    assert None not in exits, f"still running 30 s after SIGTERM: {exits}"
    return read_spans(spans_file)


def assert_no_half_traces(every: list[dict[str, Any]]) -> None:
    """Every parent is in the file, and every trace starts at a request or a socket event."""
    evidence = listing(every)
    span_ids = {s["span_id"] for s in every}
    orphans = [s for s in every if s["parent_id"] is not None and s["parent_id"] not in span_ids]
    assert not orphans, f"{listing(orphans)}\n--- every span:\n{evidence}"
    strays = [s for s in every if s["parent_id"] is None and not starts_a_trace(s)]
    assert not strays, f"{listing(strays)}\n--- every span:\n{evidence}"


async def test_a_forwarded_turn_follows_the_senders_sampling_decision(sampling_cluster, make_user):
    cluster, spans_file = sampling_cluster
    dropped_thread = await forwarded_send(cluster, make_user(), owner=cluster.a, sender=cluster.b)
    kept_thread = await forwarded_send(cluster, make_user(), owner=cluster.b, sender=cluster.a)
    a, b = cluster.a.process.pid, cluster.b.process.pid
    every = every_span_after_both_exit(cluster, spans_file)
    evidence = listing(every)

    def sends_of(thread: str) -> list[dict[str, Any]]:
        return [
            s
            for s in every
            if s["name"] == "socket client_message" and s["attributes"].get("tether.thread") == thread
        ]

    # Kept: A's send (B's first send of that thread started no trace) and B's part under it.
    kept_sends = sends_of(kept_thread)
    assert len(kept_sends) == 1, evidence
    kept = kept_sends[0]
    assert_one_forwarded_trace(
        [s for s in every if s["trace_id"] == kept["trace_id"]], kept, owner=b, sender=a
    )
    # Dropped: of that thread A recorded its own first send and turn only, nothing it served
    # for B (no mailbox request, no second turn), and B recorded nothing outside A's trace.
    dropped_sends = sends_of(dropped_thread)
    assert len(dropped_sends) == 1 and dropped_sends[0]["pid"] == a, evidence
    dropped_turns = [
        s for s in every if s["name"] == "turn" and s["attributes"].get("tether.thread") == dropped_thread
    ]
    assert len(dropped_turns) == 1 and dropped_turns[0]["parent_id"] == dropped_sends[0]["span_id"], evidence
    assert not [s for s in every if s["pid"] == a and s["name"] == "mailbox runtime.submit"], evidence
    assert not [s for s in every if s["pid"] == b and s["trace_id"] != kept["trace_id"]], evidence
    assert_no_half_traces(every)


STREAMED = ["t0 ", "t1 ", "t2 "]


async def watched_turn(cluster: Cluster, user: Any, sender: LiveServer, watcher_on: LiveServer) -> str:
    """A hooks-API thread a tab on ``sender`` runs (its first send there) and a second tab
    shows from ``watcher_on``; the tab's second send streams its reply (``stream 3``), which
    reaches the second tab over the thread's bus. The thread's id once the second tab has the
    whole reply."""
    tab = await signed_in(sender, user)
    watcher = await signed_in(watcher_on, user)
    try:
        await tab.start()
        first = await tab.send("first")
        await tab.wait_text("echo: first", timeout=30)
        await watcher.start(thread_id=first["threadId"])
        await watcher.wait_text("welcome back", timeout=30)  # its on_chat_resume, on its process
        await tab.send("stream 3")

        def streamed(client: ChatClient) -> bool:
            ids = {t["id"] for t in client.named("stream_token")}
            return len(ids) == 1 and tokens_of(client, ids.pop()) == STREAMED

        def finished(client: ChatClient) -> bool:
            return streamed(client) and any(not m.get("streaming") for m in client.named("update_message"))

        try:
            await watcher.wait_for(finished, timeout=30)
        except TimeoutError:
            raise AssertionError(f"the reply did not reach the other tab: {watcher.events}") from None
        await tab.wait_event("task_end", count=2, timeout=30)
    finally:
        await tab.disconnect()
        await watcher.disconnect()
    return str(first["threadId"])


@pytest.mark.parametrize("sampling_cluster", ["hooks"], indirect=True)
async def test_a_hooks_turns_bus_deliveries_follow_the_senders_sampling_decision(sampling_cluster, make_user):
    """A hooks-API turn runs where its socket is; its reply crosses processes on the thread's
    bus (``LiveSession._show``) to a second tab on the other process. Sent from A (ratio 1):
    B records the deliveries in A's trace, under the turn, although B keeps nothing it starts
    itself. Sent from B (ratio 0): A, keeping every trace it starts, records nothing of it."""
    cluster, spans_file = sampling_cluster
    kept_thread = await watched_turn(cluster, make_user(), sender=cluster.a, watcher_on=cluster.b)
    dropped_thread = await watched_turn(cluster, make_user(), sender=cluster.b, watcher_on=cluster.a)
    a, b = cluster.a.process.pid, cluster.b.process.pid
    every = every_span_after_both_exit(cluster, spans_file)
    evidence = listing(every)

    def turns_of(thread: str) -> list[dict[str, Any]]:
        return [s for s in every if s["name"] == "turn" and s["attributes"].get("tether.thread") == thread]

    # Kept: A's two sends and turns; the second turn's streamed reply delivered on B under it.
    kept_turns = turns_of(kept_thread)
    assert len(kept_turns) == 2 and {t["pid"] for t in kept_turns} == {a}, evidence
    streaming = max(kept_turns, key=lambda t: t["start"])
    trace = [s for s in every if s["trace_id"] == streaming["trace_id"]]
    evidence = listing(trace)
    (send,) = [s for s in trace if s["parent_id"] is None]
    assert send["name"] == "socket client_message" and send["pid"] == a, evidence
    assert streaming["parent_id"] == send["span_id"], evidence
    assert streaming["attributes"]["tether.outcome"] == "replied", evidence
    there = [s for s in trace if s["name"] == "thread_bus deliver" and s["pid"] == b]
    by_event: dict[str, list[dict[str, Any]]] = {}
    for delivery in there:
        by_event.setdefault(delivery["attributes"]["tether.event"], []).append(delivery)
    # The send's announcement hangs from the send; what the turn shows, from the turn (the
    # tokens) or from its reply's span (the finished message, written with the release).
    assert [d["parent_id"] for d in by_event.get("chat-user-message", [])] == [send["span_id"]], evidence
    tokens = by_event.get("stream_token", [])
    assert len(tokens) == len(STREAMED), evidence
    assert all(d["parent_id"] == streaming["span_id"] for d in tokens + by_event.get("stream_start", [])), (
        evidence
    )
    assert by_event.get("update_message") and all(
        descends_from(d, streaming, trace) for d in by_event["update_message"]
    ), evidence
    assert {d["kind"] for d in there} == {"SERVER"}, evidence
    # B recorded nothing but its part of A's traces: B's own sends, turns and deliveries of
    # the dropped thread, and its on_chat_resume for the kept one, are nowhere.
    a_traces = {s["trace_id"] for s in every if s["pid"] == a}
    assert not [s for s in every if s["pid"] == b and s["trace_id"] not in a_traces], listing(every)
    # Dropped: nothing of the thread B ran anywhere, though A (ratio 1) delivered its reply.
    assert turns_of(dropped_thread) == [], listing(every)
    dropped_sends = [
        s
        for s in every
        if s["name"] == "socket client_message" and s["attributes"].get("tether.thread") == dropped_thread
    ]
    assert dropped_sends == [], listing(every)
    kept_traces = {t["trace_id"] for t in kept_turns}
    stray_deliveries = [
        s for s in every if s["name"] == "thread_bus deliver" and s["trace_id"] not in kept_traces
    ]
    assert not stray_deliveries, f"{listing(stray_deliveries)}\n--- every span:\n{listing(every)}"
    assert_no_half_traces(every)
