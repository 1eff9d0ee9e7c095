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
"""

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_cluster import has_reply, move_to_the_other_process, socket_pid
from tests.support.client import ChatClient, signed_in, user_cookie
from tests.support.cluster import start_cluster
from tests.support.waiting import wait_until

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
    trace = [s for s in every if s["trace_id"] == send["trace_id"]]
    evidence = listing(trace)
    assert send["parent_id"] is None and send["kind"] == "SERVER", evidence
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
