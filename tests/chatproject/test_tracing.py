"""Traces (``chatproject.tracing``), in this process: a turn's spans form one trace, for both
kinds of app; a mailbox request carries its sender's trace; with traces off no OpenTelemetry
code runs in a turn.

The spans are OpenTelemetry's own (the SDK, the official psycopg and Redis instrumentations)
read back from the SDK's ``InMemorySpanExporter``; the sockets are ``chatproject.asgi``'s
application driven in process (``tests.support.wire.in_process_socket``). The database spans
need PostgreSQL (the psycopg instrumentation); on SQLite the rest is still checked.
``tests/e2e/test_tracing_cluster.py`` follows a forwarded turn across two real processes.
"""

import asyncio
import contextlib
import http.server
import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import FrameType
from typing import Any, ClassVar

import psycopg
import pytest
import redis
import redis.asyncio
from asgiref.sync import sync_to_async
from channels.testing import HttpCommunicator
from django.conf import settings as django_settings
from django.core.asgi import get_asgi_application
from django.db import connection, connections
from django_tasks_db.models import DBTaskResult
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from chatproject import tracing
from chatproject.tracing_export import SAMPLERS, configured_exporter
from sessions_app import webhook_tasks
from sessions_app.accepting import accept_send
from sessions_app.mailbox import Mailbox, mailbox
from sessions_app.runtime.integration_turns import accept_here, recover
from sessions_app.runtime.ownership import known_owners
from sessions_app.task_worker import task_workers
from tests.support.client import api_token, session_cookie
from tests.support.loopback import serving
from tests.support.waiting import wait_until_async
from tests.support.webhook_receiver import Receiver, hooked_box
from tests.support.wire import InProcessSocket, in_process_socket
from threads_app.models import AcceptedMessage, Thread

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
APPS = {"hooks": "tests.apps.lifecycle_app", "engine": "sessions_app.default_app"}


def _fresh_database_connections() -> None:
    """Connections opened before the instrumentation (or while it was on) are replaced: the
    psycopg instrumentation traces the connections it opens."""
    connections.close_all()
    close_pool = getattr(connection, "close_pool", None)
    if connection.vendor == "postgresql" and close_pool is not None:
        close_pool()


@contextlib.contextmanager
def traces_on(
    settings: Any, sampler: str = "parentbased_always_on", ratio: float = 1.0
) -> Iterator[InMemorySpanExporter]:
    """Traces on with that sampler, every span kept exported at its end into memory."""
    settings.TRACING_ENABLED = True
    settings.TRACING_SAMPLER, settings.TRACING_SAMPLER_RATIO = sampler, ratio
    exporter = InMemorySpanExporter()
    tracing.start(exporter, batch=False)
    _fresh_database_connections()
    try:
        yield exporter
    finally:
        tracing.stop()
        _fresh_database_connections()


@pytest.fixture
def exported(settings) -> Iterator[InMemorySpanExporter]:
    """Traces on (the default sampler: every trace)."""
    with traces_on(settings) as exporter:
        yield exporter


@pytest.fixture
def app_env(settings, monkeypatch, tmp_path) -> None:
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    monkeypatch.setenv("HOOK_LOG", str(tmp_path / "hooks.jsonl"))
    monkeypatch.setenv("ECHO_STATE_DIR", str(tmp_path / "echo"))


async def socket_for(settings: Any, make_user: Any, kind: str) -> AsyncIterator[InProcessSocket]:
    settings.CHAT_APP = APPS[kind]
    cookie = await session_cookie(make_user())
    async with in_process_socket(cookie) as opened:
        await opened.connect_namespace()
        yield opened


async def one_turn(sock: InProcessSocket, text: str, ack_id: int) -> dict[str, Any]:
    answer = await sock.call(
        "client_message", {"message": {"id": str(uuid.uuid4()), "output": text}}, ack_id=ack_id
    )
    await sock.event("task_end")
    assert isinstance(answer, dict), answer
    return answer


async def turn_ended(exported: InMemorySpanExporter, timeout: float = 5) -> None:
    """Wait for the turn's span: a hooks-API turn's ends just after its ``task_end`` goes out."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not any(s.name == "turn" for s in exported.get_finished_spans()):
        assert asyncio.get_running_loop().time() < deadline, listing(list(exported.get_finished_spans()))
        await asyncio.sleep(0.01)


def listing(spans: list[ReadableSpan]) -> str:
    """The spans as evidence: name, kind, trace, span, parent."""
    return "\n".join(
        f"{s.name} {s.kind.name} trace={s.context.trace_id:032x} span={s.context.span_id:016x} "
        f"parent={s.parent.span_id if s.parent else None!r:>}"
        for s in spans
        if s.context is not None
    )


def named(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def one(found: list[ReadableSpan], spans: list[ReadableSpan]) -> ReadableSpan:
    """The one span of ``found`` (the whole listing as evidence otherwise)."""
    assert len(found) == 1, listing(spans)
    return found[0]


def descends_from(span: ReadableSpan, ancestor: ReadableSpan, spans: list[ReadableSpan]) -> bool:
    by_id = {s.context.span_id: s for s in spans if s.context is not None}
    current: ReadableSpan | None = span
    while current is not None and current.parent is not None:
        if ancestor.context is not None and current.parent.span_id == ancestor.context.span_id:
            return True
        current = by_id.get(current.parent.span_id)
    return False


# --- a turn is one trace ------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["hooks", "engine"])
async def test_a_turn_is_one_trace_from_the_socket_event_to_the_reply(
    settings, make_user, app_env, exported, kind
):
    async for sock in socket_for(settings, make_user, kind):
        await one_turn(sock, "first", 1)  # creates the thread
        exported.clear()
        answer = await one_turn(sock, "second", 2)
        await turn_ended(exported)
    spans = list(exported.get_finished_spans())
    evidence = listing(spans)
    send = one(named(spans, "socket client_message"), spans)
    turn = one([t for t in named(spans, "turn") if t.context.trace_id == send.context.trace_id], spans)
    assert send.kind is SpanKind.SERVER and send.parent is None, evidence
    assert send.attributes is not None and send.attributes["tether.thread"] == answer["threadId"]
    # The turn runs after the ack (in another task), as a child of the send's span.
    assert turn.parent is not None and turn.parent.span_id == send.context.span_id, evidence
    assert turn.attributes is not None and turn.attributes["tether.kind"] == kind
    assert turn.attributes["tether.outcome"] == "replied", evidence
    # The thread's bus carries the trace to the sockets showing the thread (this one too).
    delivered = [
        d
        for d in named(spans, "thread_bus deliver")
        if d.attributes is not None and d.attributes["tether.event"] == "chat-user-message"
    ]
    assert delivered and all(descends_from(d, send, spans) for d in delivered), evidence
    replies = [r for r in named(spans, "reply") if r.context.trace_id == send.context.trace_id]
    assert replies and all(descends_from(r, turn, spans) for r in replies), evidence
    if connection.vendor == "postgresql":
        queries = [s for s in spans if s.instrumentation_scope and "psycopg" in s.instrumentation_scope.name]
        assert queries, evidence
        assert all(q.context.trace_id == send.context.trace_id for q in queries), evidence
        # The turn's own statements (the user step, the reply, the outcome) are under the turn.
        assert any(descends_from(q, turn, spans) for q in queries), evidence
        assert all(q.kind is SpanKind.CLIENT for q in queries)


async def test_a_reply_of_a_hook_no_send_started_starts_no_trace(settings, make_user, app_env, exported):
    """An action's callback is a hook with no turn (no send started it, no socket event span):
    the reply it shows is written and shown with no span of its own, not as a one-span trace
    of a ``reply`` with nothing above it (its database calls are dropped as stray)."""
    settings.CHAT_APP = "tests.apps.asks_app"
    cookie = await session_cookie(make_user())
    async with in_process_socket(cookie) as sock:
        await sock.connect_namespace()
        buttons = {"message": {"id": str(uuid.uuid4()), "output": "buttons"}}
        assert isinstance(await sock.call("client_message", buttons, ack_id=1), dict)
        (red,) = await sock.event("action")
        await sock.event("task_end")
        await turn_ended(exported)
        exported.clear()
        assert (await sock.call("action_call", {"action": red}, ack_id=2))["success"], red
        (shown,) = await sock.event("new_message")
        assert shown["output"] == "Colour: red", shown
        await asyncio.sleep(0.2)  # a span that would end after the event
    spans = list(exported.get_finished_spans())
    assert spans == [], listing(spans)


async def test_the_redis_calls_of_a_send_are_in_its_trace(
    settings, make_user, app_env, exported, private_redis
):
    """On the Redis channel layer with no group lease and no budget allowance (both on by
    default, and then a steady turn makes no Redis call at all): the bus's publish of the
    accepted send and the budget's take are Redis calls of the send's trace; Redis calls
    outside any traced work start no trace."""
    settings.REDIS_URL = private_redis.url
    settings.BUDGET_ALLOWANCE = 1
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "sessions_app.channel_layer.ResilientRedisChannelLayer",
            "CONFIG": {
                "hosts": [{"address": private_redis.url}],
                "capacity": 1000,
                "expiry": 60,
                "group_lease": 0,
            },
        }
    }
    async for sock in socket_for(settings, make_user, "engine"):
        await one_turn(sock, "first", 1)
        exported.clear()
        await one_turn(sock, "second", 2)
        redis.Redis.from_url(private_redis.url).ping()  # belongs to no trace: dropped
    spans = list(exported.get_finished_spans())
    evidence = listing(spans)
    send = one(named(spans, "socket client_message"), spans)
    calls = [s for s in spans if s.instrumentation_scope and "redis" in s.instrumentation_scope.name]
    assert calls, evidence
    assert all(c.context.trace_id == send.context.trace_id for c in calls), evidence
    assert not [c for c in calls if c.name == "PING"], evidence


# --- an integration's message is one trace ------------------------------------------------


def queued_attempts_now() -> list[dict[str, Any]]:
    """The queued webhook attempts' arguments (as stored: what a worker runs them with)."""
    return [
        r.args_kwargs
        for r in DBTaskResult.objects.filter(queue_name=webhook_tasks.queue()).order_by("enqueued_at")
    ]


queued_attempts = sync_to_async(queued_attempts_now)


async def attempts_for(*message_ids: str) -> list[dict[str, Any]]:
    """The queued attempts of these messages' deliveries, once each of them has one (the
    queue may hold others: a worker an earlier test started in this process may have run an
    attempt and queued its retry)."""
    attempts = [a for a in await queued_attempts() if json.loads(a["args"][1])["messageId"] in message_ids]
    delivered = {json.loads(a["args"][1])["messageId"] for a in attempts}
    return attempts if delivered == set(message_ids) else []


@pytest.fixture
def integration_env(settings, app_env, own_webhook_queue) -> None:
    settings.CHAT_APP = APPS["engine"]
    settings.WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    settings.TASK_WORKER_THREADS = 0  # the tests run the attempt, as a worker runs it
    task_workers.stop()  # and no worker an earlier test started in this process runs it too


async def post_message(http_app: Any, token: str, thread_id: str, text: str) -> str:
    """POST an integration's message through Django's ASGI handler, in process: 202; returns
    the message's id."""
    message_id = str(uuid.uuid4())
    body = json.dumps({"messageId": message_id, "message": text}).encode()
    post = HttpCommunicator(
        http_app,
        "POST",
        f"/api/integrations/threads/{thread_id}/messages/",
        body=body,
        headers=[
            (b"host", b"testserver"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"authorization", f"Token {token}".encode()),
        ],
    )
    answer = await post.get_response(timeout=10)
    assert answer["status"] == 202, answer
    return message_id


@contextlib.asynccontextmanager
async def box_owned_elsewhere(box_id: uuid.UUID) -> AsyncIterator[None]:
    """This process takes the box for another process's (a second mailbox of this one, serving
    ``runtime.integration`` as an owner does): a message for it crosses the mailbox."""
    other = Mailbox()
    other.register("runtime.integration", accept_here)
    try:
        there = await other.channel()
        known_owners.put(("box", box_id), there, asyncio.get_running_loop().time())
        yield
    finally:
        known_owners.forget(("box", box_id))
        other.reset()
        mailbox.reset()


@pytest.mark.parametrize("owner", ["here", "forwarded"])
async def test_an_integration_message_is_one_trace_from_the_request_to_the_webhook_attempt(
    make_user, integration_env, exported, owner
):
    """The POST (Django's own span), the mailbox request to the box's owner when it is
    another process, the turn and its reply, and the webhook attempt, a task run later from
    the database with the trace in its arguments."""
    http_app = get_asgi_application()  # its middleware now has the Django instrumentation's
    user = make_user()
    token = await api_token(user)
    hook = Receiver()
    thread_id = str(uuid.uuid4())
    async with serving(hook.handle) as port:
        box = await hooked_box(user, f"http://127.0.0.1:{port}/hook")
        async with box_owned_elsewhere(box.id) if owner == "forwarded" else contextlib.AsyncExitStack():
            message_id = await post_message(http_app, token, thread_id, "hello")
            await wait_until_async(lambda: attempts_for(message_id), timeout=30)
        (stored,) = await attempts_for(message_id)
        assert stored["kwargs"]["trace"]["traceparent"], stored  # the trace rides in the task
        run_attempt = sync_to_async(webhook_tasks.deliver_attempt.call)
        assert await run_attempt(*stored["args"], **stored["kwargs"]) == "delivered (attempt 1)"
        assert len(hook.deliveries) == 1
    spans = list(exported.get_finished_spans())
    evidence = listing(spans)
    request = one([s for s in spans if s.kind is SpanKind.SERVER and s.parent is None], spans)
    assert request.attributes is not None and request.attributes.get("http.method", "POST") == "POST", (
        evidence
    )
    turn = one(named(spans, "turn"), spans)
    assert turn.attributes is not None and turn.attributes["tether.outcome"] == "success", evidence
    assert turn.attributes["tether.thread"] == thread_id, evidence
    assert descends_from(turn, request, spans), evidence
    hops = named(spans, "mailbox runtime.integration")
    if owner == "forwarded":
        hop = one(hops, spans)
        assert hop.kind is SpanKind.SERVER and descends_from(hop, request, spans), evidence
        assert turn.parent is not None and turn.parent.span_id == hop.context.span_id, evidence
    else:
        assert hops == [], evidence
    replies = named(spans, "reply")
    assert replies and all(descends_from(r, turn, spans) for r in replies), evidence
    attempt = one(named(spans, "webhook attempt"), spans)
    assert attempt.kind is SpanKind.CONSUMER and descends_from(attempt, request, spans), evidence
    assert attempt.parent is not None and attempt.parent.span_id == turn.context.span_id, evidence
    assert attempt.attributes is not None and attempt.attributes["tether.outcome"] == "delivered (attempt 1)"
    assert {s.context.trace_id for s in spans} == {request.context.trace_id}, evidence
    if connection.vendor == "postgresql":
        queries = [s for s in spans if s.instrumentation_scope and "psycopg" in s.instrumentation_scope.name]
        assert any(descends_from(q, turn, spans) for q in queries), evidence
        assert any(descends_from(q, attempt, spans) for q in queries), evidence


async def run_attempts_of(message_id: str) -> list[str]:
    """Run the queued attempts of the message's delivery as a worker would, each retry as
    soon as it is queued (its delay not waited for); what each returned."""
    run_attempt = sync_to_async(webhook_tasks.deliver_attempt.call)
    results: list[str] = []
    while True:
        attempts = await attempts_for(message_id)
        if len(attempts) == len(results):
            return results
        stored = attempts[len(results)]
        try:
            results.append(await run_attempt(*stored["args"], **stored["kwargs"]))
        except (webhook_tasks.DeliveryFailed, webhook_tasks.DeliveryRefused) as ended:
            results.append(repr(ended))


async def test_a_webhook_retry_is_in_the_trace_of_the_turn_that_made_the_response(
    make_user, integration_env, exported
):
    """A first attempt the receiver answers with a 503 queues the next one with the same
    trace in its arguments: both attempts are children of the turn."""
    http_app = get_asgi_application()
    user = make_user()
    token = await api_token(user)
    hook = Receiver()
    hook.statuses = [503]
    async with serving(hook.handle) as port:
        await hooked_box(user, f"http://127.0.0.1:{port}/hook")
        message_id = await post_message(http_app, token, str(uuid.uuid4()), "hello")
        await wait_until_async(lambda: attempts_for(message_id), timeout=30)
        results = await run_attempts_of(message_id)
        stored = await attempts_for(message_id)
    assert results[-1] == "delivered (attempt 2)" and len(results) == 2, results
    assert stored[0]["kwargs"] == stored[1]["kwargs"], stored  # the retry carries the same trace
    spans = list(exported.get_finished_spans())
    evidence = listing(spans)
    turn = one(named(spans, "turn"), spans)
    attempts = named(spans, "webhook attempt")
    assert sorted(int(str(a.attributes["tether.attempt"])) for a in attempts if a.attributes) == [1, 2], (
        evidence
    )
    assert all(a.parent is not None and a.parent.span_id == turn.context.span_id for a in attempts), evidence
    outcomes = sorted(str(a.attributes["tether.outcome"]) for a in attempts if a.attributes)
    assert outcomes[0] == "delivered (attempt 2)", evidence
    assert outcomes[1].startswith("failed (HTTP 503); attempt 2 in "), evidence


@sync_to_async
def thread_of_box(box: Any) -> Thread:
    return Thread.objects.filter(box=box).get()


async def test_a_recovered_integration_send_is_one_trace_from_its_turn_to_its_webhook_attempt(
    make_user, integration_env, exported
):
    """A send its owner accepted and died before answering is answered by a recovery pass,
    which belongs to no trace: its turn is the trace's root, and the response's webhook
    attempt its child, not a root of its own."""
    http_app = get_asgi_application()
    user = make_user()
    token = await api_token(user)
    hook = Receiver()
    async with serving(hook.handle) as port:
        box = await hooked_box(user, f"http://127.0.0.1:{port}/hook")
        first = await post_message(http_app, token, str(uuid.uuid4()), "first")  # opens the thread
        await wait_until_async(lambda: attempts_for(first), timeout=30)
        thread = await thread_of_box(box)
        # What the dead owner left: the send committed, no turn run for it.
        acceptance = await accept_send(
            thread=thread,
            author=user,
            message_id=uuid.uuid4(),
            text="second",
            source=AcceptedMessage.Source.INTEGRATION,
        )
        exported.clear()
        assert await recover(box.id, [acceptance.record]) == 1
        second = str(acceptance.record.client_id)
        await wait_until_async(lambda: attempts_for(second), timeout=30)
        assert await run_attempts_of(second) == ["delivered (attempt 1)"]
    spans = list(exported.get_finished_spans())
    evidence = listing(spans)
    turn = one(named(spans, "turn"), spans)
    assert turn.parent is None and turn.attributes is not None, evidence
    assert turn.attributes["tether.sends"] == str(acceptance.record.pk), evidence
    attempt = one(named(spans, "webhook attempt"), spans)
    assert attempt.parent is not None and attempt.parent.span_id == turn.context.span_id, evidence
    assert {s.context.trace_id for s in spans} == {turn.context.trace_id}, evidence


# --- the mailbox carries the trace --------------------------------------------------------


async def test_a_mailbox_request_is_served_in_the_senders_trace(settings, app_env, exported):
    """A request to another mailbox (another process's, here a second mailbox of this one on
    the same channel layer) is served in a span whose parent is the sender's span."""
    other = Mailbox()
    served: list[dict[str, str] | None] = []

    async def handler(message: dict[str, Any]) -> str:
        served.append(tracing.carrier())
        with tracing.span("work there"):
            return "done"

    other.register("test.traced", handler)
    try:
        there = await other.channel()
        with tracing.span("work here"):
            assert await mailbox.request(there, {"type": "test.traced"}) == "done"
    finally:
        other.reset()
        mailbox.reset()
    spans = list(exported.get_finished_spans())
    evidence = listing(spans)
    here = one(named(spans, "work here"), spans)
    request = one(named(spans, "mailbox test.traced"), spans)
    work = one(named(spans, "work there"), spans)
    assert request.kind is SpanKind.SERVER, evidence
    assert request.context.trace_id == here.context.trace_id == work.context.trace_id, evidence
    assert request.parent is not None and request.parent.span_id == here.context.span_id, evidence
    assert work.parent is not None and work.parent.span_id == request.context.span_id, evidence
    assert served[0] and served[0]["traceparent"].split("-")[1] == f"{here.context.trace_id:032x}"


async def test_a_mailbox_request_from_untraced_work_starts_no_trace_there(settings, app_env, exported):
    """A request sent outside any span (a reconnect's ``runtime.watch``, a loop's) is served
    with no span of the mailbox's: the serving process records no one-span trace of it, and
    work the handler starts there is a root of its own."""
    other = Mailbox()

    async def handler(message: dict[str, Any]) -> str:
        with tracing.span("work there"):
            return "done"

    other.register("test.untraced", handler)
    try:
        there = await other.channel()
        assert await mailbox.request(there, {"type": "test.untraced"}) == "done"
    finally:
        other.reset()
        mailbox.reset()
    spans = list(exported.get_finished_spans())
    evidence = listing(spans)
    assert not named(spans, "mailbox test.untraced"), evidence
    work = one(named(spans, "work there"), spans)
    assert work.parent is None, evidence


# --- sampling -----------------------------------------------------------------------------


@pytest.fixture
def sampled(request, settings) -> Iterator[InMemorySpanExporter]:
    """Traces on with the sampler and ratio the test names (``indirect`` parametrization)."""
    sampler, ratio = request.param
    with traces_on(settings, sampler, ratio) as exporter:
        yield exporter


@pytest.mark.parametrize(
    "sampled",
    [(s, r) for s in ("traceidratio", "parentbased_traceidratio") for r in (0.0, 1.0)],
    indirect=True,
    ids=lambda p: f"{p[0]}-{p[1]:g}",
)
async def test_a_ratio_of_0_records_no_turn_and_1_records_every_turn(settings, make_user, app_env, sampled):
    ratio = settings.TRACING_SAMPLER_RATIO
    async for sock in socket_for(settings, make_user, "engine"):
        for n, text in enumerate(("first", "second", "third"), start=1):
            await one_turn(sock, text, n)
        if ratio:
            await turn_ended(sampled)
    await asyncio.sleep(0.2)  # a span that would end after the last event
    spans = list(sampled.get_finished_spans())
    if not ratio:
        assert spans == [], listing(spans)
        return
    sends = named(spans, "socket client_message")
    assert len(sends) == 3, listing(spans)
    traces = {s.context.trace_id for s in sends}
    assert len(traces) == 3 and {t.context.trace_id for t in named(spans, "turn")} == traces, listing(spans)


@pytest.mark.parametrize(
    ("sampled", "flags"),
    [(("parentbased_traceidratio", 0.0), "01"), (("parentbased_traceidratio", 1.0), "00")],
    indirect=["sampled"],
    ids=["kept-there-ratio-0-here", "dropped-there-ratio-1-here"],
)
async def test_a_request_over_the_mailbox_follows_its_senders_decision(settings, app_env, sampled, flags):
    """The sender's span came from another process (its ``traceparent``, as a forwarded
    turn's does): whatever this process's own ratio, the request is served in that trace if
    the sender kept it, and nothing of it is recorded if the sender dropped it."""
    trace_id, sender = f"{uuid.uuid4().int:032x}", f"{uuid.uuid4().int >> 64:016x}"
    other = Mailbox()

    async def handler(message: dict[str, Any]) -> str:
        with tracing.span("work there"):
            return "done"

    other.register("test.traced", handler)
    try:
        there = await other.channel()
        with tracing.received({"traceparent": f"00-{trace_id}-{sender}-{flags}"}, "forwarded here"):
            assert await mailbox.request(there, {"type": "test.traced"}) == "done"
    finally:
        other.reset()
        mailbox.reset()
    spans = list(sampled.get_finished_spans())
    if flags == "00":
        assert spans == [], listing(spans)
        return
    names = {s.name for s in spans}
    assert {"forwarded here", "mailbox test.traced", "work there"} <= names, listing(spans)
    assert {f"{s.context.trace_id:032x}" for s in spans} == {trace_id}, listing(spans)


def test_stray_client_calls_stay_dropped_under_every_sampler(settings):
    """A database or Redis call with no parent starts no trace, whichever sampler is set."""
    for sampler in settings.TRACING_SAMPLERS:
        with traces_on(settings, sampler) as exporter:
            with tracing.span("stray", kind="client"):
                pass
            with tracing.span("root", kind="server"), tracing.span("call", kind="client"):
                pass
            names = [s.name for s in exporter.get_finished_spans()]
        assert "stray" not in names, (sampler, names)
        assert names == ([] if sampler.endswith("always_off") else ["call", "root"]), (sampler, names)


def test_every_sampler_the_settings_accept_is_built():
    assert set(SAMPLERS) == set(django_settings.TRACING_SAMPLERS)


@pytest.mark.parametrize(
    ("env", "error"),
    [
        ({"OTEL_TRACES_SAMPLER": "sometimes"}, "OTEL_TRACES_SAMPLER must be one of"),
        ({"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "1%"}, "ratio from 0 to 1"),
        (
            {"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"},
            "ratio from 0 to 1",
        ),
    ],
)
def test_a_bad_sampler_setting_stops_the_start_with_a_clear_error(env, error):
    """The settings module, read in a fresh process with ``env``, refuses to load."""
    refused = subprocess.run(
        [sys.executable, "-c", "import chatproject.settings"],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode != 0 and error in refused.stderr, refused.stderr[-2000:]


# --- off: nothing runs --------------------------------------------------------------------


class OpenTelemetryCalls:
    """Every call into an ``opentelemetry`` module from this thread (``sys.setprofile``)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, frame: FrameType, event: str, _arg: Any) -> None:
        if event == "call" and "/opentelemetry/" in frame.f_code.co_filename:
            self.calls.append(f"{frame.f_code.co_filename}:{frame.f_code.co_name}")

    def __enter__(self) -> "OpenTelemetryCalls":
        sys.setprofile(self)
        return self

    def __exit__(self, *_exc: Any) -> None:
        sys.setprofile(None)


def instrumented() -> list[str]:
    """The library functions the instrumentations wrap, where they are wrapped now."""
    wrapped = {
        "psycopg.connect": psycopg.connect,
        "psycopg.Connection.connect": psycopg.Connection.connect,
        "redis.Redis.execute_command": redis.Redis.execute_command,
        "redis.asyncio.Redis.execute_command": redis.asyncio.Redis.execute_command,
    }
    return [name for name, function in wrapped.items() if hasattr(function, "__wrapped__")]


@pytest.mark.parametrize("kind", ["hooks", "engine"])
async def test_with_traces_off_a_turn_runs_no_opentelemetry_code(settings, make_user, app_env, kind):
    assert not settings.TRACING_ENABLED  # the default
    tracing.start()  # what asgi.py does: nothing, with traces off
    assert not tracing.enabled()
    assert instrumented() == []  # no database or Redis call goes through a wrapper
    async for sock in socket_for(settings, make_user, kind):
        await one_turn(sock, "first", 1)
        with OpenTelemetryCalls() as seen:
            await one_turn(sock, "second", 2)
    assert seen.calls == [], seen.calls[:20]


async def test_with_traces_off_an_integration_turn_runs_no_opentelemetry_code(
    settings, make_user, integration_env
):
    """The POST's turn on the event loop (the view's thread is not watched) and the task it
    queues, which carries no trace."""
    assert not settings.TRACING_ENABLED
    http_app = get_asgi_application()
    user = make_user()
    token = await api_token(user)
    thread_id = str(uuid.uuid4())
    await hooked_box(user, "http://127.0.0.1:9/hook")
    first = await post_message(http_app, token, thread_id, "first")
    await wait_until_async(lambda: attempts_for(first), timeout=30)
    with OpenTelemetryCalls() as seen:
        second = await post_message(http_app, token, thread_id, "second")
        await wait_until_async(lambda: attempts_for(second), timeout=30)
    assert seen.calls == [], seen.calls[:20]
    attempts = await attempts_for(first, second)
    assert attempts and [a["kwargs"] for a in attempts] == [{}] * len(attempts), attempts  # no trace


async def test_the_pin_sees_opentelemetry_code_when_traces_are_on(settings, make_user, app_env, exported):
    """The check above would see OpenTelemetry's code if a turn ran any."""
    assert set(instrumented()) >= {"psycopg.Connection.connect", "redis.Redis.execute_command"}
    async for sock in socket_for(settings, make_user, "engine"):
        await one_turn(sock, "first", 1)
        with OpenTelemetryCalls() as seen:
            await one_turn(sock, "second", 2)
    assert seen.calls, "a traced turn ran no OpenTelemetry code in the event loop's thread"


# --- the OTLP exporter --------------------------------------------------------------------


class Collector(http.server.BaseHTTPRequestHandler):
    """A stand-in OTLP/HTTP receiver: keeps every request's decoded spans."""

    received: ClassVar[list[tuple[str, str]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource_spans in request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                Collector.received.extend((self.path, span.name) for span in scope_spans.spans)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *_args: Any) -> None:
        pass


def test_the_default_exporter_sends_otlp_over_http_where_the_standard_variables_say(settings, monkeypatch):
    """``OTEL_TRACES_EXPORTER=otlp`` (the default): the SDK's OTLP/HTTP exporter, configured
    by ``OTEL_EXPORTER_OTLP_ENDPOINT``, delivers the spans to that receiver."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Collector.received.clear()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{server.server_port}")
    settings.TRACING_ENABLED = True
    assert settings.TRACING_EXPORTER == "otlp"
    exporter = configured_exporter()
    assert exporter is not None
    tracing.start(exporter, batch=False)
    try:
        with tracing.span("exported"):
            pass
    finally:
        tracing.stop()
        server.shutdown()
    assert Collector.received == [("/v1/traces", "exported")]
