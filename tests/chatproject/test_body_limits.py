"""Request bodies over their endpoint's budget are refused before Django reads them (413),
and a body built to blow up the JSON parser costs the server a bounded amount of memory."""

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from chatproject.body_limits import BodyLimitMiddleware, limit_for
from tests.support.client import api_token, login_cookie
from tests.support.latency import assert_others_unaffected, latency_probe, paced
from tests.support.wire import raw_socket

BUDGET = 2_000_000


class RecordingApp:
    """An inner ASGI app that reads the whole body, as Django's handler does."""

    def __init__(self) -> None:
        self.body = b""
        self.aborted = False

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                self.aborted = True
                return
            self.body += message.get("body", b"")
            if not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


async def call(
    path: str, chunks: list[bytes], headers: list[tuple[bytes, bytes]]
) -> tuple[RecordingApp, list[Any]]:
    inner, sent = RecordingApp(), []
    queue = [
        {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)
    ]
    taken = 0

    async def receive() -> dict[str, Any]:
        nonlocal taken
        taken += 1
        return queue.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "path": path, "method": "POST", "headers": headers}
    await BodyLimitMiddleware(inner)(scope, receive, send)
    return inner, sent


def test_budgets_by_endpoint(settings):
    settings.MAX_REQUEST_BODY_BYTES = 1000
    settings.INTEGRATION_MAX_BODY_BYTES = 2000
    settings.SEND_MAX_BODY_BYTES = 3000
    assert limit_for("/api/threads/x/") == 1000
    assert limit_for("/accounts/login/") == 1000
    assert limit_for("/api/integrations/threads/x/messages/") == 2000
    assert limit_for("/api/chat/send") == 3000
    assert limit_for("/api/uploads/") > settings.MAX_IMAGE_BYTES


async def test_a_declared_length_over_the_budget_is_refused_without_reading(settings):
    settings.MAX_REQUEST_BODY_BYTES = 1000
    inner, sent = await call("/api/threads/", [b"x" * 10], [(b"content-length", b"5000")])
    assert inner.body == b"" and not inner.aborted  # the app never ran
    assert sent[0]["status"] == 413
    assert json.loads(sent[1]["body"]) == {
        "detail": "The request body is over 1 KB, the limit of this endpoint."
    }


async def test_a_streamed_body_is_cut_off_at_the_budget(settings):
    settings.MAX_REQUEST_BODY_BYTES = 1000
    inner, sent = await call("/api/threads/", [b"x" * 600] * 5, [])
    assert inner.aborted and len(inner.body) == 600
    assert [m.get("status") for m in sent if m["type"] == "http.response.start"] == [413]


async def test_a_body_within_the_budget_passes_untouched(settings):
    settings.MAX_REQUEST_BODY_BYTES = 1000
    inner, sent = await call("/api/threads/", [b"x" * 500, b"y" * 500], [(b"content-length", b"1000")])
    assert inner.body == b"x" * 500 + b"y" * 500 and sent[0]["status"] == 200


async def test_a_json_body_over_its_shape_budget_is_cut_at_the_chunk_that_shows_it(settings):
    settings.JSON_MAX_CONTAINERS = 100
    chunks = [b"[" + b"[]," * 30, b"[]," * 30, b"[]," * 30, b"[]," * 30, b"[]]"]
    json_type = [(b"content-type", b"application/json; charset=utf-8")]
    inner, sent = await call("/api/chat/send", chunks, json_type)
    assert inner.aborted and inner.body == b"".join(chunks[:3])  # the 4th chunk crossed it
    assert sent[0]["status"] == 400
    assert json.loads(sent[1]["body"]) == {"detail": "The JSON body holds more than 100 arrays and objects."}
    # The same bytes as another type are not JSON to the API: not measured here.
    inner, sent = await call("/api/chat/send", chunks, [(b"content-type", b"text/plain")])
    assert inner.body == b"".join(chunks) and sent[0]["status"] == 200


# --- against a real daphne ----------------------------------------------------------------------


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.fixture(scope="module")
def limits_server(server_factory, tmp_path_factory):
    return server_factory.start(
        CHAT_APP="sessions_app.default_app",
        ECHO_STATE_DIR=str(tmp_path_factory.mktemp("echo-limits")),
        SEND_MAX_BODY_BYTES=str(40_000_000),
        # The latency probe sends 60 messages per comparison, up to three comparisons on a
        # loaded machine: more than the default budget of 120 at a quiet machine's pace. The
        # bodies measured here are refused before any budget is spent.
        SEND_THROTTLE_RATE="1000/min",
    )


async def post(url: str, data: Any, token: str, **headers: str) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession(headers={"Authorization": f"Token {token}", **headers}) as http,
        http.post(url, data=data) as response,
    ):
        return response.status, await response.json(content_type=None)


def json_post(server: Any, path: str, body: bytes, token: str) -> Callable[[], Awaitable[tuple[int, Any]]]:
    async def send() -> tuple[int, Any]:
        return await post(server.url + path, body, token, **{"Content-Type": "application/json"})

    return send


@pytest.mark.abuse
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("megabytes", [10, 30])
async def test_bodies_of_empty_arrays_are_refused_and_cost_others_nothing(
    limits_server, make_user, megabytes
):
    """Before: 30 MB of ``[],`` took one process from 117 to 947 MB, and it stayed. Now each
    body is a 400 at the chunk that crosses the budget, the server keeps about one body's
    size, and another user's messages are answered about as fast while such bodies keep
    arriving at link speed."""
    body = b"[" + b"[]," * (megabytes * 1_000_000 // 3) + b"[]]"
    send = json_post(limits_server, "/api/chat/send", body, await api_token(make_user()))

    async def flood() -> None:
        status, answer = await send()
        assert status == 400 and "arrays and objects" in answer["detail"]

    pid = limits_server.process.pid
    async with latency_probe(limits_server, make_user()) as probe:
        before = rss_kib(pid)
        await assert_others_unaffected(
            probe, paced(flood, nbytes=len(body)), f"{megabytes} MB of [], to /api/chat/send"
        )
    await asyncio.sleep(0.5)
    growth_mib = (rss_kib(pid) - before) / 1024
    # The bug kept the parsed lists: about 28x the body (830 MiB for 30 MB). What stays now is
    # the allocator's high-water mark of chunks read while others' requests ran alongside: up
    # to about 3 bodies' worth on a loaded machine (117 MiB once for 30 MB in CI).
    bound_mib = 3 * megabytes + 40
    assert growth_mib < bound_mib, f"RSS grew {growth_mib:.0f} MiB (bound {bound_mib} MiB)"


@pytest.mark.abuse
@pytest.mark.django_db(transaction=True)
@pytest.mark.xfail(
    reason="known limit: a send body is parsed whole before its message is found too long (photos "
    "travel inline, so the body budget is 134 MB); json.loads of 10 MB holds the GIL about 25 ms "
    "on the request thread, and other users wait about 3x as long",
    # Not strict: the bound is on timings, and on a quiet machine a run can pass by luck (one
    # XPASS in CI, 2026-11-30), which says nothing about the limit being gone.
    strict=False,
)
async def test_a_10_mb_message_is_refused_for_its_length_and_costs_others_nothing(limits_server, make_user):
    """A body of an ordinary shape holding one 10 MB string. Before, DRF's surrogate check also
    read every character in Python (half a second, holding the GIL) before the length refused
    it, and another user's round trips took 7x as long; now 3x (the reason above)."""
    message = b'{"messageId": "%s", "message": "%s"}' % (str(uuid.uuid4()).encode(), b"x" * 10_000_000)
    send = json_post(limits_server, "/api/chat/send", message, await api_token(make_user()))

    async def flood() -> None:
        status, answer = await send()
        assert status == 400 and answer == {
            "message": ["Ensure this field has no more than 100000 characters."]
        }

    async with latency_probe(limits_server, make_user()) as probe:
        await assert_others_unaffected(probe, paced(flood, nbytes=len(message)), "10 MB messages")


@pytest.mark.abuse
@pytest.mark.django_db(transaction=True)
async def test_100k_deep_bodies_are_a_json_400_and_cost_others_nothing(limits_server, make_user):
    token = await api_token(make_user())
    deep = b"[" * 100_000 + b"]" * 100_000
    sends = [
        json_post(limits_server, path, deep, token)
        for path in ("/api/chat/send", f"/api/integrations/threads/{uuid.uuid4()}/messages/")
    ]

    async def flood() -> None:
        for send in sends:
            status, answer = await send()
            assert status == 400 and "nested deeper than 32 levels" in answer["detail"]

    async with latency_probe(limits_server, make_user()) as probe:
        await assert_others_unaffected(
            probe, paced(flood, requests=2, nbytes=2 * len(deep)), "100k-deep JSON bodies"
        )


@pytest.mark.abuse
@pytest.mark.django_db(transaction=True)
async def test_a_string_that_never_ends_is_measured_in_linear_time(limits_server, make_user):
    """Before: a string of escaped quotes that never ends (after a few brackets, so the
    skeleton had to be measured) took quadratic time with the GIL held: a 40 KB body froze
    the whole server for 5 s, a 1 MB body or socket frame would have for most of an hour."""
    user = make_user()
    body = b"[" * 40 + b'"' + b'\\"' * 450_000
    send = json_post(
        limits_server, f"/api/integrations/threads/{uuid.uuid4()}/messages/", body, await api_token(user)
    )
    cookie = await login_cookie(limits_server.url, user.username, user.raw_password)
    async with raw_socket(limits_server, cookie) as sock:
        await sock.handshake()
        await sock.connect_namespace()

        async def flood() -> None:
            status, answer = await send()
            assert status == 400 and "nested deeper than 32 levels" in answer["detail"]
            await sock.send_text('42["client_message", ' + body.decode())  # a message may fill a frame
            (error,) = await sock.event("error")
            assert "nested deeper than 32 levels" in error["message"]

        async with latency_probe(limits_server, make_user()) as probe:
            await assert_others_unaffected(
                probe, paced(flood, requests=2, nbytes=2 * len(body)), "strings that never end"
            )


@pytest.mark.abuse
@pytest.mark.django_db(transaction=True)
async def test_over_budget_bodies_are_413_declared_or_streamed(limits_server, make_user):
    token = await api_token(make_user())
    thread = f"{limits_server.url}/api/integrations/threads/{uuid.uuid4()}/messages/"
    status, answer = await post(thread, b"x" * 1_500_000, token, **{"Content-Type": "application/json"})
    assert status == 413 and answer["detail"].startswith("The request body is over 1.0 MB")

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: the cap counts the bytes as they arrive
        for _ in range(30):
            yield b"y" * 100_000

    status, answer = await post(thread, chunks(), token, **{"Content-Type": "application/json"})
    assert status == 413 and "limit of this endpoint" in answer["detail"]
