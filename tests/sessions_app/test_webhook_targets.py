"""Webhooks go to public addresses only (after DNS resolution, on every attempt) unless
WEBHOOK_ALLOWED_HOSTS says otherwise; the signature covers the timestamp and the delivery id;
a receiver's answer is read up to a small cap."""

import asyncio
import hashlib
import hmac
import ipaddress
import socket
import time
import uuid
from datetime import datetime
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.resolver import ThreadedResolver
from asgiref.sync import sync_to_async
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from sessions_app import webhook_targets, webhooks
from tests.support.client import api_token
from tests.support.latency import assert_others_unaffected, latency_probe, paced
from tests.support.loopback import serving
from threads_app.models import Box
from threads_app.services import default_box_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "0.0.0.0",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "224.0.0.1",
        "240.0.0.1",
        "100.64.0.1",
        "::1",
        "::",
        "fe80::1",
        "fc00::1",
        "ff02::1",
        "::ffff:127.0.0.1",
    ],
)
def test_internal_addresses_are_refused(address):
    assert not webhook_targets.is_public(ipaddress.ip_address(address))
    with pytest.raises(webhook_targets.ForbiddenDestination, match="not a public address"):
        webhook_targets.check_address("hook.example", address)


@pytest.mark.parametrize("address", ["93.184.215.14", "2606:4700::1111", "8.8.8.8"])
def test_public_addresses_pass(address):
    webhook_targets.check_address("hook.example", address)


def test_the_allowance_takes_names_addresses_and_networks(settings):
    settings.WEBHOOK_ALLOWED_HOSTS = ["hooks.internal", "127.0.0.1", "10.0.0.0/8", "[::1]"]
    assert webhook_targets.host_allowed("HOOKS.internal.")
    for address in ("127.0.0.1", "10.20.30.40", "::1"):
        webhook_targets.check_address("x", address)
    with pytest.raises(webhook_targets.ForbiddenDestination):
        webhook_targets.check_address("x", "192.168.0.1")
    webhook_targets.check_literal("127.0.0.1")
    with pytest.raises(webhook_targets.ForbiddenDestination):
        webhook_targets.check_literal("169.254.169.254")


class Receiver:
    port: int  # set by the receiver fixture, once it serves

    def __init__(self) -> None:
        self.deliveries: list[tuple[dict[str, str], bytes]] = []
        self.sent_bytes = 0
        self.huge = False
        self.cut = 0  # huge answers the other side stopped reading

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.deliveries.append((dict(request.headers), await request.read()))
        if not self.huge:
            return web.Response(text="ok")
        response = web.StreamResponse()
        await response.prepare(request)
        chunk = b"z" * 65536
        try:
            for _ in range(200_000_000 // len(chunk)):  # 200 MB, if anybody reads it
                await response.write(chunk)
                self.sent_bytes += len(chunk)
        except (ConnectionError, RuntimeError):  # aiohttp: "Connection lost" once the reader hangs up
            self.cut += 1
        return response


@pytest.fixture
async def receiver():
    hook = Receiver()
    async with serving(hook.handle) as port:
        hook.port = port
        yield hook


async def deliver(box: Box, payload: dict[str, Any]) -> webhooks.Attempt:
    """One attempt of a new delivery of ``payload``."""
    return await webhooks.attempt(box, webhooks.encode(payload), uuid.uuid4().hex)


@sync_to_async
def box_with(user, url: str) -> Box:
    box = default_box_for(user)
    box.webhook_url = url
    box.save(update_fields=["webhook_url"])
    return box


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "0.0.0.0", "[::1]"])
async def test_loopback_deliveries_are_refused_without_the_allowance(make_user, receiver, settings, host):
    settings.WEBHOOK_ALLOWED_HOSTS = []
    settings.WEBHOOK_RETRY_DELAYS = [0.01]
    box = await box_with(make_user(), f"http://{host}:{receiver.port}/hook")
    assert (await deliver(box, {"hello": "me"})).outcome is webhooks.Outcome.REFUSED
    assert receiver.deliveries == []


async def test_a_name_that_rebinds_to_loopback_is_refused_on_the_next_attempt(
    make_user, receiver, settings, monkeypatch
):
    """The first attempt resolves to an allowed address where nothing listens (a connection
    error), the retry resolves the same name to 127.0.0.1, where the receiver is: that
    attempt is checked again and refused, nothing is sent."""
    settings.WEBHOOK_ALLOWED_HOSTS = ["127.0.0.2"]
    settings.WEBHOOK_RETRY_DELAYS = [0.01, 0.01]
    answers = iter(["127.0.0.2", "127.0.0.1", "127.0.0.1"])
    lookups: list[str] = []

    async def resolve(self, host, port=0, family=socket.AF_INET):
        address = next(answers)
        lookups.append(address)
        return [
            {
                "hostname": host,
                "host": address,
                "port": port,
                "family": socket.AF_INET,
                "proto": 0,
                "flags": 0,
            }
        ]

    monkeypatch.setattr(ThreadedResolver, "resolve", resolve)
    box = await box_with(make_user(), f"http://rebinding.example:{receiver.port}/hook")
    first = await webhooks.attempt(box, b"{}", "d1", 1)
    second = await webhooks.attempt(box, b"{}", "d1", 2)
    assert (first.outcome, second.outcome) == (webhooks.Outcome.FAILED, webhooks.Outcome.REFUSED)
    assert lookups == ["127.0.0.2", "127.0.0.1"]  # resolved on every attempt; the second one refused
    assert receiver.deliveries == []


async def test_the_signature_covers_timestamp_and_delivery_id(make_user, receiver, settings):
    settings.WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    box = await box_with(make_user(), f"http://127.0.0.1:{receiver.port}/hook")
    assert (await deliver(box, {"hello": "signed"})).outcome is webhooks.Outcome.DELIVERED
    (headers, body), *_ = receiver.deliveries
    timestamp, delivery = headers["X-Tether-Timestamp"], headers["X-Tether-Delivery"]
    assert abs(int(timestamp) - time.time()) < 60

    def signature(ts: str, dv: str) -> str:
        signed = f"{ts}.{dv}.".encode() + body
        return "sha256=" + hmac.new(box.webhook_secret.encode(), signed, hashlib.sha256).hexdigest()

    assert headers["X-Tether-Signature"] == signature(timestamp, delivery)
    # A replay with a fresh timestamp or another delivery id no longer matches.
    assert headers["X-Tether-Signature"] != signature(str(int(timestamp) + 600), delivery)
    assert headers["X-Tether-Signature"] != signature(timestamp, uuid.uuid4().hex)
    body_only = "sha256=" + hmac.new(box.webhook_secret.encode(), body, hashlib.sha256).hexdigest()
    assert headers["X-Tether-Signature"] != body_only


async def test_a_huge_answer_is_read_up_to_the_cap_only(make_user, receiver, settings):
    """Before: a 200 MB answer was read whole (RSS +360 MB)."""
    settings.WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    settings.WEBHOOK_MAX_RESPONSE_BYTES = 65536
    receiver.huge = True
    box = await box_with(make_user(), f"http://127.0.0.1:{receiver.port}/hook")
    started = time.monotonic()
    assert (await deliver(box, {"hello": "flood"})).outcome is webhooks.Outcome.DELIVERED
    assert time.monotonic() - started < 5
    await asyncio.sleep(0.2)
    assert receiver.sent_bytes < 20_000_000  # what the socket buffers took before the close


@pytest.mark.abuse
async def test_huge_webhook_answers_are_cut_at_the_cap_and_cost_others_nothing(
    engine_server, make_user, receiver
):
    """The issue's webhook target answering 200 MB, on a real daphne: every delivery reads
    64 KiB of it and hangs up, and another user's messages are answered about as fast."""
    receiver.huge = True
    user = make_user()
    await box_with(user, f"http://127.0.0.1:{receiver.port}/hook")
    token = await api_token(user)
    thread = str(uuid.uuid4())
    deliveries = 0

    async def integration_message() -> None:
        nonlocal deliveries
        deliveries += 1
        async with (
            aiohttp.ClientSession(headers={"Authorization": f"Token {token}"}) as http,
            http.post(
                f"{engine_server.url}/api/integrations/threads/{thread}/messages/",
                json={"messageId": str(uuid.uuid4()), "message": f"answer me {deliveries}"},
            ) as response,
        ):
            assert response.status == 202
        for _ in range(1000):  # the answer is delivered (by a task worker), and cut
            if receiver.cut >= deliveries:
                break
            await asyncio.sleep(0.01)
        assert receiver.cut == deliveries == len(receiver.deliveries)

    async with latency_probe(engine_server, make_user()) as probe:
        await assert_others_unaffected(probe, paced(integration_message), "webhook targets answering 200 MB")
    assert receiver.sent_bytes < deliveries * 20_000_000  # what the socket buffers took before each close


@pytest.mark.abuse
async def test_a_server_without_the_allowance_does_not_deliver_to_loopback(
    server_factory, private_redis, tmp_path_factory, make_user, receiver
):
    """Before: deliveries went to 127.0.0.1, localhost and 0.0.0.0. (On a Redis of its own: a
    deployment of its own, whose webhook queue no other server of the run, allowed loopback,
    takes from.)"""
    server = server_factory.start(
        REDIS_URL=private_redis.url,
        CHAT_APP="sessions_app.default_app",
        ECHO_STATE_DIR=str(tmp_path_factory.mktemp("echo-ssrf")),
        WEBHOOK_RETRY_DELAYS="0.05",
        TASK_WORKER_THREADS="2",
    )
    started = timezone.now()
    user = make_user()
    token = await api_token(user)
    await box_with(user, f"http://localhost:{receiver.port}/hook")
    thread = str(uuid.uuid4())
    async with (
        aiohttp.ClientSession(headers={"Authorization": f"Token {token}"}) as http,
        http.post(
            f"{server.url}/api/integrations/threads/{thread}/messages/",
            json={"messageId": str(uuid.uuid4()), "message": "call home"},
        ) as response,
    ):
        assert response.status == 202
    # The turn is answered, and its delivery's attempt fails as refused, never reaching the receiver.
    for _ in range(150):
        if refused := await refused_attempts(started):
            break
        await asyncio.sleep(0.1)
    assert refused and "not a public address" in refused[0], refused
    assert receiver.deliveries == []


@sync_to_async
def refused_attempts(since: datetime) -> list[str]:
    """The tracebacks of webhook attempts refused since ``since``."""
    return list(
        DBTaskResult.objects.filter(
            queue_name__startswith="webhooks-",
            enqueued_at__gte=since,
            exception_class_path__endswith="DeliveryRefused",
        ).values_list("traceback", flat=True)
    )
