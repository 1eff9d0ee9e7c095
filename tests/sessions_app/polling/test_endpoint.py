"""Engine.IO long-polling at ``/ws/socket.io/`` against real daphne servers, with
python-socketio's own client (default transports: polling, then the upgrade) and by hand
(aiohttp), for what a stock client does not show: the payload format, error bodies, the
session's owner check, overlapping GETs and a client that vanishes."""

import asyncio
import json
import uuid
from typing import Any

import aiohttp
import pytest

from tests.support.client import ChatClient, user_cookie
from tests.support.polling import PollingClient

pytestmark = pytest.mark.django_db(transaction=True)

FAST_PING_INTERVAL = 0.5
FAST_PING_TIMEOUT = 1.0


@pytest.fixture(scope="module")
def fast_server(server_factory):
    """Pings every half second, so a vanished client is noticed within seconds."""
    return server_factory.start(
        SOCKETIO_PING_INTERVAL=str(FAST_PING_INTERVAL), SOCKETIO_PING_TIMEOUT=str(FAST_PING_TIMEOUT)
    )


async def test_a_default_python_socketio_client_polls_then_upgrades_and_chats(server_each, make_user):
    """Under daphne and under uvicorn."""
    server = server_each
    client = ChatClient(server.url, await user_cookie(server.url, make_user()), transports=None)
    await client.start()
    assert client.sio is not None
    await client.wait_text("greeting")
    await asyncio.sleep(0.5)
    assert client.sio.transport() == "websocket", "the client did not upgrade"
    answer = await client.send("hello over the upgrade")
    assert answer.get("error") is None, answer
    await client.wait_text("echo: hello over the upgrade")
    assert client.texts().count("echo: hello over the upgrade") == 1, client.texts()
    await client.disconnect()


async def test_a_polling_only_python_socketio_client_does_a_full_turn(server_each, make_user):
    server = server_each
    client = ChatClient(server.url, await user_cookie(server.url, make_user()), transports=("polling",))
    await client.start()
    assert client.sio is not None
    await client.wait_text("greeting")
    answer = await client.send("stream 30")
    try:
        await client.wait_for(lambda c: any("t29" in text for text in c.texts()))
    except TimeoutError:
        raise AssertionError(f"no reply; the send was answered {answer}; events: {client.events}") from None
    assert client.sio.transport() == "polling"
    tokens = [t["token"] for t in client.named("stream_token")]
    assert tokens == [f"t{i} " for i in range(30)], tokens
    await client.disconnect()


async def test_the_open_packet_offers_the_upgrade_and_payloads_are_separated(server, make_user):
    cookie = await user_cookie(server.url, make_user())
    async with PollingClient([server.url], cookie) as poll:
        assert poll.open["upgrades"] == ["websocket"], poll.open
        assert set(poll.open) == {"sid", "upgrades", "pingInterval", "pingTimeout", "maxPayload"}
        await poll.connect_namespace({"sessionId": str(uuid.uuid4())})
        # Two packets in one POST: both are handled, in order.
        await poll.post_packets(
            [
                '42["connection_successful"]',
                '420["client_message",{"message":{"id":"' + str(uuid.uuid4()) + '","output":"two in one"}}]',
            ]
        )
        events = await poll.events_until(lambda evs: any("echo: two in one" in json.dumps(e) for e in evs))
        assert any(name == "new_message" for name, _ in events), events


async def test_an_unknown_sid_gets_engineio_s_error_body(server):
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{server.url}/ws/socket.io/?EIO=4&transport=polling&sid=nope") as response:
            assert response.status == 400
            assert await response.json() == {"code": 1, "message": "Session ID unknown"}
        async with http.get(f"{server.url}/ws/socket.io/?EIO=3&transport=polling") as response:
            assert response.status == 400
            assert (await response.json())["code"] == 5


async def test_another_users_request_with_the_sid_reads_nothing(server, make_user):
    owner = await user_cookie(server.url, make_user())
    intruder = await user_cookie(server.url, make_user())
    async with PollingClient([server.url], owner) as poll:
        await poll.connect_namespace({"sessionId": str(uuid.uuid4())})
        async with aiohttp.ClientSession() as http:
            for headers in ({"Cookie": intruder}, {"Authorization": "Token not-the-owners"}):
                url = f"{server.url}/ws/socket.io/?EIO=4&transport=polling&sid={poll.sid}"
                async with http.get(url, headers=headers) as response:
                    body = await response.text()
                    assert response.status == 400, body
                    assert json.loads(body) == {"code": 1, "message": "Session ID unknown"}
                async with http.post(url, headers=headers, data='42["connection_successful"]') as response:
                    assert response.status == 400
        # The owner's session is untouched and still served.
        await poll.post_packets(['42["connection_successful"]'])
        events = await poll.events_until(lambda evs: any(name == "new_message" for name, _ in evs))
        assert events


async def test_a_foreign_origin_is_refused(server, make_user):
    cookie = await user_cookie(server.url, make_user())
    async with aiohttp.ClientSession() as http:
        url = f"{server.url}/ws/socket.io/?EIO=4&transport=polling"
        async with http.get(url, headers={"Cookie": cookie, "Origin": "http://evil.example"}) as response:
            assert response.status == 403, await response.text()
        async with http.get(url, headers={"Cookie": cookie, "Origin": server.url}) as response:
            assert response.status == 200, await response.text()


async def test_a_get_that_arrives_after_the_probe_is_not_held(server, make_user):
    """socket.io-client pauses polling on ``3probe`` and waits for its GET in flight; when that
    GET reaches the server only after the probe, it gets a noop at once, not a ping interval
    later (which held the upgrade for up to 25 s)."""
    cookie = await user_cookie(server.url, make_user())
    async with PollingClient([server.url], cookie) as poll, aiohttp.ClientSession() as http:
        await poll.connect_namespace({"sessionId": str(uuid.uuid4())})
        await poll.drain()
        url = f"{server.url}/ws/socket.io/?EIO=4&transport=websocket&sid={poll.sid}"
        async with http.ws_connect(url, headers={"Cookie": cookie}) as ws:
            await ws.send_str("2probe")
            message = await asyncio.wait_for(ws.receive(), 10)
            assert message.data == "3probe", message
            started = asyncio.get_running_loop().time()
            status, body = await asyncio.wait_for(poll.get_raw(), 30)
            held = asyncio.get_running_loop().time() - started
            # A noop, or a ping the server had queued before the probe (seen on a loaded machine).
            packets = set(body.split("\x1e"))
            assert (status, packets <= {"6", "2"}, held < 2) == (200, True, True), (
                status,
                body,
                f"held {held:.1f} s",
            )
            await ws.send_str("5")
            await ws.send_str('42["connection_successful"]')
            frames: list[str] = []
            while not any(f.startswith('42["task_end"') for f in frames):  # the session goes on
                frames.append((await asyncio.wait_for(ws.receive(), 10)).data)
        status, _ = await poll.get_raw()
        assert status == 400  # upgraded: no longer polled


async def test_a_second_concurrent_get_closes_the_session(fast_server, make_user):
    cookie = await user_cookie(fast_server.url, make_user())
    session_id = str(uuid.uuid4())
    async with PollingClient([fast_server.url], cookie) as poll:
        await poll.connect_namespace({"sessionId": session_id})
        await poll.drain()
        first = asyncio.ensure_future(poll.get_raw())
        await asyncio.sleep(0.1)
        second_status, second_body = await poll.get_raw()
        assert second_status == 400, second_body
        status, body = await first
        assert status == 200 and "1" in body.split("\x1e"), (status, body)
        status, body = await poll.get_raw()
        assert status == 400, (status, body)
    await _wait_disconnected(fast_server, session_id)


async def test_a_vanished_polling_client_is_disconnected_once(fast_server, make_user):
    cookie = await user_cookie(fast_server.url, make_user())
    session_id = str(uuid.uuid4())
    async with PollingClient([fast_server.url], cookie) as poll:
        await poll.connect_namespace({"sessionId": session_id})
        await poll.post_packets(['42["connection_successful"]'])
        await poll.events_until(lambda evs: any(name == "new_message" for name, _ in evs))
        # No GET from now on: the server's pings go unanswered.
    await _wait_disconnected(fast_server, session_id)
    # A GET coming back late finds the session closed: the close packet after the pings
    # nobody answered, then the sid is unknown.
    url = f"{fast_server.url}/ws/socket.io/?EIO=4&transport=polling&sid={poll.sid}"
    async with aiohttp.ClientSession() as http:
        async with http.get(url, headers={"Cookie": cookie}) as response:
            body = await response.text()
            assert response.status == 200 and body.split("\x1e")[-1] == "1", (response.status, body)
        async with http.get(url, headers={"Cookie": cookie}) as response:
            assert response.status == 400, await response.text()


async def _wait_disconnected(server: Any, session_id: str) -> None:
    """The session's socket is gone: its row says disconnected (its disconnect ran)."""
    from asgiref.sync import sync_to_async

    from sessions_app.models import SocketSession

    def connected() -> bool | None:
        row = SocketSession.objects.filter(id=session_id).first()
        return None if row is None else row.disconnected_at is None

    for _ in range(100):
        if await sync_to_async(connected)() is False:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"session {session_id} still connected: {await sync_to_async(connected)()}")


@pytest.fixture(scope="module")
def limited_server(server_factory):
    """Small frames and a send budget of 3 a minute."""
    return server_factory.start(SOCKETIO_MAX_PAYLOAD="20000", SEND_THROTTLE_RATE="3/min")


async def test_posted_packets_meet_the_limits_and_budgets_of_frames(limited_server, make_user):
    cookie = await user_cookie(limited_server.url, make_user())
    async with PollingClient([limited_server.url], cookie) as poll:
        assert poll.open["maxPayload"] == 20000
        await poll.connect_namespace({"sessionId": str(uuid.uuid4())})
        url = f"{limited_server.url}/ws/socket.io/?EIO=4&transport=polling&sid={poll.sid}"
        assert poll.http is not None
        # A body over maxPayload is refused before it is read (Engine.IO's maxHttpBufferSize).
        async with poll.http.post(url, data="4" + "2" * 25000) as response:
            assert response.status == 413, await response.text()
        # A packet over its event's limit is refused unparsed, with an error ack.
        big = "42" + "9" + json.dumps(["stop", "x" * 5000])  # a stop fits in 4096 bytes
        await poll.post_packets([big])
        await poll.events_until(lambda _events: 9 in poll.acks)
        assert "exceeds the limit" in json.dumps(poll.acks[9]), poll.acks[9]
        # Sends spend from the same budget as on a socket: the fourth is refused.
        for n in range(4):
            message = {"message": {"id": str(uuid.uuid4()), "output": f"send {n}"}}
            await poll.emit("client_message", message, ack_id=20 + n)
        await poll.events_until(lambda _events: all(20 + n in poll.acks for n in range(4)), timeout=30)
        answers = [poll.acks[20 + n][0] for n in range(4)]
        refused = [a for a in answers if "retryAfter" in a]
        assert len(refused) == 1 and "error" in refused[0], answers


async def test_a_draining_server_closes_its_polling_sessions_at_once(server_factory, make_user):
    """SIGTERM: the waiting GET gets the close packet at once (so the client reconnects
    elsewhere), and the session's disconnect runs."""
    draining = server_factory.start(SHUTDOWN_GRACE="8")
    cookie = await user_cookie(draining.url, make_user())
    client = ChatClient(draining.url, cookie, transports=("polling",))
    await client.start()
    await client.wait_text("greeting")
    assert client.sio is not None and client.sio.connected
    draining.terminate(wait=False)
    began = asyncio.get_running_loop().time()
    for _ in range(100):
        if not client.sio.connected:
            break
        await asyncio.sleep(0.05)
    assert not client.sio.connected, "the polling client was not told the server is going away"
    assert asyncio.get_running_loop().time() - began < 4
    await _wait_disconnected(draining, client.session_id)
    draining.process.wait(30)
