"""The Socket.IO v5 / Engine.IO 4 wire protocol against a real daphne server.

Well-formed traffic goes through python-socketio's ``AsyncClient`` (via ``ChatClient``); what
an unmodified client cannot send (garbage, broken JSON, binary frames, events before the
namespace CONNECT, a client that never answers pings) goes through a raw aiohttp WebSocket.
Every bad-input test also checks that a bystander connected to the same server is still
served afterwards. The same protocol logic runs in process, without a server, in
``test_consumer_inprocess.py`` (fast, and debuggable in one stack); the frame helpers of both
are in ``tests/support/wire.py``.
"""

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from socketio import packet as sio

from tests.support.client import ChatClient, user_cookie
from tests.support.wire import RawSocket, decode, new_auth, raw_socket
from threads_app.models import Step, Thread

pytestmark = pytest.mark.django_db(transaction=True)

FAST_PING_INTERVAL = 0.3
FAST_PING_TIMEOUT = 0.6
SMALL_MAX_PAYLOAD = 2000


@asynccontextmanager
async def connected(server: Any, cookie: str, **kwargs: Any) -> AsyncIterator[RawSocket]:
    """Open a raw socket and complete the handshake and the namespace CONNECT."""
    async with raw_socket(server, cookie, **kwargs) as sock:
        await sock.handshake()
        await sock.connect_namespace()
        yield sock


async def healthy_client(server: Any, cookie: str) -> ChatClient:
    client = ChatClient(server.url, cookie)
    await client.start()
    await client.wait_text("greeting")
    return client


async def assert_still_serving(client: ChatClient) -> None:
    """A client of the same server still gets its message answered."""
    text = f"are you there {uuid.uuid4().hex[:8]}"
    await client.send(text)
    await client.wait_text(f"echo: {text}")


@sync_to_async
def written_for(user: Any) -> tuple[int, int]:
    """(steps, threads) stored for ``user``."""
    return Step.objects.filter(thread__owner=user).count(), Thread.objects.filter(owner=user).count()


@sync_to_async
def steps_starting(user: Any, prefix: str) -> int:
    return Step.objects.filter(thread__owner=user, output__startswith=prefix).count()


@pytest.fixture(scope="module")
def fast_server(server_factory):
    """A server with a sub-second heartbeat and a small payload limit."""
    return server_factory.start(
        SOCKETIO_PING_INTERVAL=str(FAST_PING_INTERVAL),
        SOCKETIO_PING_TIMEOUT=str(FAST_PING_TIMEOUT),
        SOCKETIO_MAX_PAYLOAD=str(SMALL_MAX_PAYLOAD),
    )


@pytest.fixture
async def cookie(server, make_user):
    """A signed-in user's Cookie header (sessions live in the database: valid on every server)."""
    return await user_cookie(server.url, make_user())


@pytest.fixture
async def bystander(server, cookie):
    """A healthy python-socketio client on the shared server, connected before the test acts."""
    client = await healthy_client(server, cookie)
    yield client
    await client.disconnect()


# --- handshake ------------------------------------------------------------------------------


async def test_open_packet_and_namespace_connect(server, cookie):
    async with raw_socket(server, cookie) as sock:
        opened = await sock.handshake()
        assert set(opened) == {"sid", "upgrades", "pingInterval", "pingTimeout", "maxPayload"}
        assert isinstance(opened["sid"], str) and opened["sid"]
        assert opened["upgrades"] == []
        assert opened["pingInterval"] == int(settings.SOCKETIO_PING_INTERVAL * 1000)
        assert opened["pingTimeout"] == int(settings.SOCKETIO_PING_TIMEOUT * 1000)
        assert opened["maxPayload"] == settings.SOCKETIO_MAX_PAYLOAD

        await sock.ws.send_str("40" + json.dumps(new_auth()))
        answer = await sock.next_frame()
        assert answer.startswith("40{"), answer
        sid = json.loads(answer[2:])["sid"]
        # Socket.IO v5: the namespace sid is its own, not the Engine.IO one.
        assert isinstance(sid, str) and sid and sid != opened["sid"]
        await sock.still_usable()


async def test_other_namespace_gets_connect_error_and_root_still_connects(server, cookie):
    async with raw_socket(server, cookie) as sock:
        await sock.handshake()
        await sock.ws.send_str("40/admin," + json.dumps(new_auth()))
        refused = decode(await sock.next_frame())
        assert (refused.packet_type, refused.namespace) == (sio.CONNECT_ERROR, "/admin")
        assert refused.data == {"message": "Invalid namespace"}
        # The refusal concerns that namespace only.
        assert await sock.connect_namespace()
        await sock.still_usable()


async def test_connect_without_credentials_gets_connect_error(server):
    async with raw_socket(server, None) as sock:
        await sock.handshake()
        await sock.ws.send_str("40" + json.dumps(new_auth()))
        refused = decode(await sock.next_frame())
        assert refused.packet_type == sio.CONNECT_ERROR
        assert refused.data == {"message": "authentication failed"}


@pytest.mark.parametrize(
    "query", ["EIO=3&transport=websocket", "transport=websocket", "EIO=4&transport=polling"]
)
async def test_engineio_3_and_polling_are_refused(server, query):
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        async with raw_socket(server, None, query=query):
            pass
    assert refused.value.status == 403


# --- heartbeat ------------------------------------------------------------------------------


async def test_server_pings_and_keeps_a_client_that_pongs(fast_server, cookie):
    async with connected(fast_server, cookie) as sock:
        assert sock.open["pingInterval"] == int(FAST_PING_INTERVAL * 1000)
        assert sock.open["pingTimeout"] == int(FAST_PING_TIMEOUT * 1000)
        with pytest.raises(TimeoutError):
            # Nothing but pings (answered by next_frame) for several intervals.
            await sock.expect(lambda _frame: False, timeout=FAST_PING_INTERVAL * 6)
        assert len(sock.pings) >= 3
        await sock.still_usable()


async def test_client_that_never_pongs_is_closed_after_the_ping_timeout(fast_server, cookie):
    async with connected(fast_server, cookie, answer_pings=False) as sock:
        code = await sock.closed(timeout=(FAST_PING_INTERVAL + FAST_PING_TIMEOUT) * 4)
        closed_at = time.monotonic()
        assert code == 4008  # RFC 6455 1008 (policy), mirrored: daphne may send only 1000 or 3000-4999
        assert len(sock.pings) == 1
        waited = closed_at - sock.pings[0]
        assert FAST_PING_TIMEOUT * 0.8 <= waited <= FAST_PING_TIMEOUT + 1.5, waited


async def test_python_socketio_client_stays_connected_across_pings(fast_server, cookie):
    client = await healthy_client(fast_server, cookie)
    try:
        await asyncio.sleep(FAST_PING_INTERVAL * 6)
        assert client.sio is not None and client.sio.connected
        await assert_still_serving(client)
    finally:
        await client.disconnect()


# --- acks -----------------------------------------------------------------------------------


async def test_event_with_ack_id_gets_an_ack_packet(server, cookie):
    message_id = str(uuid.uuid4())
    async with connected(server, cookie) as sock:
        await sock.send_event("client_message", {"message": {"id": message_id, "output": "hi"}}, ack_id=17)
        frame = await sock.expect(lambda f: f.startswith("43"))
        assert frame.startswith("4317[")
        (answer,) = json.loads(frame[len("4317") :])
        assert answer["messageId"] == message_id and uuid.UUID(answer["threadId"])
        # The user's own step is confirmed first, then the reply.
        user_step = (await sock.event("new_message", timeout=10))[0]
        assert (user_step["type"], user_step["output"]) == ("user_message", "hi")
        assert user_step["metadata"]["acceptedIds"] == [message_id]
        assert [m["output"] for m in await sock.event("new_message", timeout=10)] == ["echo: hi"]


async def test_python_socketio_call_gets_the_ack(bystander):
    message_id = str(uuid.uuid4())
    answer = await bystander.send("hello", message_id=message_id)
    assert answer["messageId"] == message_id
    await bystander.wait_text("echo: hello")


# --- bad input ------------------------------------------------------------------------------


async def test_garbage_text_gets_an_error_then_a_close(server, cookie, bystander):
    async with connected(server, cookie) as sock:
        await sock.ws.send_str("hello, is this Engine.IO?")
        (error,) = await sock.event("error")
        assert "not an Engine.IO packet" in error["message"]
        assert await sock.closed() == 4002  # RFC 6455 1002 (protocol error), mirrored
    await assert_still_serving(bystander)


async def test_a_text_frame_that_is_not_utf8_ends_the_connection(server, cookie, bystander):
    """Autobahn does not validate UTF-8 here (``chatproject.serve``); daphne's decoder does, and
    the connection is dropped as autobahn would have dropped it. Nothing reaches the consumer."""
    async with connected(server, cookie) as sock:
        await sock.ws.send_frame(b'42["client_message", "\xff\xfe"]', aiohttp.WSMsgType.TEXT)
        assert await sock.closed() == 1006  # dropped without a close frame, as autobahn drops it
    await assert_still_serving(bystander)


async def test_broken_json_gets_an_error_and_the_socket_stays_usable(server, cookie, bystander):
    async with connected(server, cookie) as sock:
        for frame, expected in [
            ('42["client_message", {"message": ', "malformed packet"),
            ("42" + "[" * 4_000, "malformed packet"),  # too deep (a deeper frame is over its event's budget)
            ("4x[]", "malformed packet"),  # not a packet type
            ("4", "malformed"),  # a MESSAGE with no Socket.IO packet at all
        ]:
            await sock.ws.send_str(frame)
            (error,) = await sock.event("error")
            assert error["message"].startswith(expected), (frame[:40], error)
        await sock.still_usable()
    await assert_still_serving(bystander)


async def test_event_data_that_is_not_name_and_args_is_refused(server, cookie, bystander):
    malformed = "malformed event: expected [name, ...args]"
    async with connected(server, cookie) as sock:
        for ack_id, data in enumerate(['{"name": "client_message"}', "[]", "[1, 2]", '"client_message"', ""]):
            await sock.ws.send_str(f"42{ack_id}{data}")
            assert await sock.ack(ack_id) == [{"error": malformed}], data
            (error,) = await sock.event("error")
            assert error == {"message": malformed, "event": None}
        await sock.still_usable()
    await assert_still_serving(bystander)


async def test_unknown_event_gets_an_error_event_and_an_error_ack(server, cookie, bystander):
    client = await healthy_client(server, cookie)
    try:
        await client.emit("no_such_event", {"x": 1})
        (error,) = await client.wait_event("error")
        assert error == {"message": "unknown event 'no_such_event'", "event": "no_such_event"}
        answer = await client.call("no_such_event", {"x": 1})
        assert answer == {"error": "unknown event 'no_such_event'"}
        assert len(await client.wait_event("error", count=2)) == 2
        await assert_still_serving(client)
    finally:
        await client.disconnect()
    await assert_still_serving(bystander)


async def test_client_message_with_a_non_uuid_id_is_refused_and_not_stored(server, make_user, bystander):
    user = make_user()
    client = await healthy_client(server, await user_cookie(server.url, user))
    try:
        answer = await client.call("client_message", {"message": {"id": "not-a-uuid", "output": "hi"}})
        assert answer == {"error": "message.id must be a UUID"}
        (error,) = await client.wait_event("error")
        assert error == {"message": "message.id must be a UUID", "event": "client_message"}
        await asyncio.sleep(0.3)
        assert await written_for(user) == (0, 0)
        assert "echo: hi" not in client.texts()
    finally:
        await client.disconnect()
    await assert_still_serving(bystander)


async def test_client_message_with_wrong_types_is_refused(server, make_user, bystander):
    user = make_user()
    client = await healthy_client(server, await user_cookie(server.url, user))
    cases = [
        ({"message": {"id": str(uuid.uuid4()), "output": 42}}, "message.output must be a string"),
        ({"message": {"id": str(uuid.uuid4()), "output": ["hi"]}}, "message.output must be a string"),
        ("just a string", "client_message needs {message: {id, output}}"),
        ({"message": "hi"}, "client_message needs {message: {id, output}}"),
        (None, "client_message needs {message: {id, output}}"),
    ]
    try:
        for count, (payload, message) in enumerate(cases, start=1):
            assert await client.call("client_message", payload) == {"error": message}, payload
            errors = await client.wait_event("error", count=count)
            assert errors[-1] == {"message": message, "event": "client_message"}
        await asyncio.sleep(0.2)
        assert await written_for(user) == (0, 0)
        await assert_still_serving(client)
    finally:
        await client.disconnect()
    await assert_still_serving(bystander)


async def test_bad_auth_field_types_get_connect_error_not_a_crash(server, cookie, bystander):
    for field, value in [("clientType", ["webapp"]), ("chatProfile", {"a": 1}), ("userEnv", "[1]")]:
        async with raw_socket(server, cookie) as sock:
            await sock.handshake()
            await sock.ws.send_str("40" + json.dumps({**new_auth(), field: value}))
            refused = decode(await sock.next_frame())
            assert refused.packet_type == sio.CONNECT_ERROR, (field, refused.data)
            assert refused.data["message"]
            # Refused, not crashed: the socket can still CONNECT properly.
            await sock.connect_namespace()
            await sock.still_usable()
    await assert_still_serving(bystander)


async def test_binary_frame_and_binary_packet_get_an_error(server, cookie, bystander):
    async with connected(server, cookie) as sock:
        await sock.ws.send_bytes(b"\x04binary")
        (error,) = await sock.event("error")
        assert "binary" in error["message"]
        # A BINARY_EVENT announcing an attachment that would follow as a binary frame.
        await sock.ws.send_str('451-7["upload",{"_placeholder":true,"num":0}]')
        assert await sock.ack(7) == [{"error": "binary packets are not supported"}]
        (error,) = await sock.event("error")
        assert error["message"] == "binary packets are not supported"
        await sock.still_usable()
    await assert_still_serving(bystander)


async def test_packet_types_a_client_may_not_send_get_an_error(server, cookie, bystander):
    async with connected(server, cookie) as sock:
        for frame in ['44{"message":"from the client"}', "47[]", '49["x"]']:
            await sock.ws.send_str(frame)
            (error,) = await sock.event("error")
            assert error["message"].startswith("unsupported packet type"), frame
        await sock.still_usable()
    await assert_still_serving(bystander)


async def test_frame_over_max_payload_gets_an_error_then_close_4009(fast_server, make_user, cookie):
    user = make_user()
    other = await healthy_client(fast_server, cookie)
    try:
        async with connected(fast_server, await user_cookie(fast_server.url, user)) as sock:
            assert sock.open["maxPayload"] == SMALL_MAX_PAYLOAD
            # Just under the limit is fine.
            fits = {"message": {"id": str(uuid.uuid4()), "output": "x" * (SMALL_MAX_PAYLOAD - 200)}}
            await sock.send_event("client_message", fits, ack_id=1)
            assert "messageId" in (await sock.ack(1))[0]
            # Over it, counted in bytes (each "€" is 3 of them in UTF-8), is not.
            too_big = {"message": {"id": str(uuid.uuid4()), "output": "€" * (SMALL_MAX_PAYLOAD // 3 + 50)}}
            frame = "42" + json.dumps(["client_message", too_big], ensure_ascii=False)
            assert len(frame) < SMALL_MAX_PAYLOAD < len(frame.encode())
            await sock.ws.send_str(frame)
            (error,) = await sock.event("error")
            assert "exceeds the limit" in error["message"]
            assert await sock.closed() == 4009  # RFC 6455 1009 (too big), mirrored
        await asyncio.sleep(0.2)
        assert await steps_starting(user, "€") == 0
        assert await steps_starting(user, "x" * 100) == 1
        await assert_still_serving(other)
    finally:
        await other.disconnect()


async def test_event_before_namespace_connect_is_refused(server, make_user, bystander):
    user = make_user()
    async with raw_socket(server, await user_cookie(server.url, user)) as sock:
        await sock.handshake()
        await sock.send_event(
            "client_message", {"message": {"id": str(uuid.uuid4()), "output": "early"}}, ack_id=3
        )
        assert await sock.ack(3) == [{"error": "not connected to this namespace"}]
        (error,) = await sock.event("error")
        assert error["message"] == "not connected to this namespace"
        await asyncio.sleep(0.2)
        assert await written_for(user) == (0, 0)
        # The socket may still CONNECT and then be served.
        await sock.connect_namespace()
        await sock.still_usable()
    await assert_still_serving(bystander)
