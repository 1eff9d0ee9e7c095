"""The socket endpoint's lifecycle and protocol logic, in this process: no daphne.

Each test drives ``chatproject.asgi.application`` (origin check, cookie and token auth,
routing, ``ChatConsumer``) through Channels' ``WebsocketCommunicator`` (``InProcessSocket``)
with the in-memory channel layer, the test database and the hooks app
``tests.apps.lifecycle_app``. They run in well under a second each and a breakpoint in the
consumer stops in the test's own stack. ``test_socketio_protocol.py`` and
``test_lifecycle.py`` prove the same contracts on the wire, with real clients and a daphne.
"""

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings as django_settings
from socketio import packet as sio

from sessions_app.models import SocketSession
from tests.support.client import api_token, session_cookie
from tests.support.hook_log import hook_calls
from tests.support.wire import InProcessSocket, decode, in_process_socket, new_auth
from threads_app.models import AcceptedMessage, Step, Thread

pytestmark = pytest.mark.django_db(transaction=True)

GREETING = "greeting"  # what tests.apps.lifecycle_app's on_chat_start sends


class HookLog:
    """The hooks the lifecycle app ran in this test."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def calls(self, session: str, hook: str) -> list[dict[str, Any]]:
        return hook_calls(self.path, session, hook)


@pytest.fixture
def hooks(settings, monkeypatch, tmp_path) -> Iterator[HookLog]:
    """The lifecycle hooks app on the in-memory channel layer, logging to a file of this test.
    (``load_app`` loads the app again whenever ``CHAT_APP`` names another one.)"""
    settings.CHAT_APP = "tests.apps.lifecycle_app"
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    path = tmp_path / "hooks.jsonl"
    monkeypatch.setenv("HOOK_LOG", str(path))
    yield HookLog(path)


@pytest.fixture
async def user(hooks, make_user):
    return make_user()


@pytest.fixture
async def cookie(user) -> str:
    return await session_cookie(user)


@pytest.fixture
async def sock(cookie: str) -> AsyncIterator[InProcessSocket]:
    """A socket of a signed-in user, past the handshake and the namespace CONNECT."""
    async with in_process_socket(cookie) as opened:
        await opened.connect_namespace()
        yield opened


def events(sock: InProcessSocket, name: str) -> list[Any]:
    """The first argument of every ``name`` event the socket has read so far."""
    found = []
    for frame in sock.frames:
        if frame.startswith("42"):
            packet = decode(frame)
            if packet.data[0] == name:
                found.append(packet.data[1] if len(packet.data) > 1 else None)
    return found


def texts(sock: InProcessSocket) -> list[str]:
    return [m["output"] for m in events(sock, "new_message")]


def is_event(frame: str, name: str) -> bool:
    return frame.startswith("42") and decode(frame).data[0] == name


async def started(sock: InProcessSocket) -> None:
    """Send ``connection_successful`` as the web client does, and wait for the greeting's
    turn to end (no hook is left running when the test ends)."""
    await sock.send_event("connection_successful")
    await sock.expect(lambda f: is_event(f, "new_message") and decode(f).data[1]["output"] == GREETING)
    await sock.event("task_end")


@sync_to_async
def written_for(user: Any) -> tuple[int, int]:
    """(steps, threads) stored for ``user``."""
    return Step.objects.filter(thread__owner=user).count(), Thread.objects.filter(owner=user).count()


@sync_to_async
def thread_of(user: Any) -> Thread:
    from threads_app.services import default_box_for

    return Thread.objects.create(owner=user, box=default_box_for(user), name="theirs")


# --- Engine.IO handshake -----------------------------------------------------------------


async def test_the_open_packet_says_what_the_server_expects(hooks, cookie):
    async with in_process_socket(cookie) as sock:
        assert set(sock.open) == {"sid", "upgrades", "pingInterval", "pingTimeout", "maxPayload"}
        assert isinstance(sock.open["sid"], str) and sock.open["sid"]
        assert sock.open["upgrades"] == []
        assert sock.open["pingInterval"] == int(django_settings.SOCKETIO_PING_INTERVAL * 1000)
        assert sock.open["pingTimeout"] == int(django_settings.SOCKETIO_PING_TIMEOUT * 1000)
        assert sock.open["maxPayload"] == django_settings.SOCKETIO_MAX_PAYLOAD


async def test_engineio_3_and_polling_are_refused_at_the_handshake(hooks, cookie):
    for query in ["EIO=3&transport=websocket", "transport=websocket", "EIO=4&transport=polling"]:
        assert not await InProcessSocket(cookie, query=query).accept(), query


async def test_a_foreign_browser_origin_is_refused_and_our_own_is_not(hooks, cookie):
    assert not await InProcessSocket(cookie, headers={"origin": "https://evil.example"}).accept()
    host = django_settings.ALLOWED_HOSTS[0]
    ours = InProcessSocket(cookie, headers={"host": host, "origin": f"http://{host}"})
    assert await ours.accept()
    await ours.leave()


# --- namespace CONNECT / CONNECT_ERROR ---------------------------------------------------


async def test_namespace_connect_answers_with_its_own_sid(hooks, cookie):
    async with in_process_socket(cookie) as sock:
        sid = await sock.connect_namespace()
        # Socket.IO v5: the namespace sid is its own, not the Engine.IO one.
        assert sid and sid != sock.open["sid"]
        await sock.still_usable()


async def test_another_namespace_is_refused_and_the_root_still_connects(hooks, cookie):
    async with in_process_socket(cookie) as sock:
        await sock.send_text("40/admin," + json.dumps(new_auth()))
        refused = decode(await sock.next_frame())
        assert (refused.packet_type, refused.namespace) == (sio.CONNECT_ERROR, "/admin")
        assert refused.data == {"message": "Invalid namespace"}
        await sock.connect_namespace()
        await sock.still_usable()


async def test_no_credentials_get_connect_error(hooks):
    async with in_process_socket(None) as sock:
        assert await sock.refused_connect(new_auth()) == {"message": "authentication failed"}


BAD_AUTH = [
    ({"sessionId": "not-a-uuid"}, "sessionId must be a UUID"),
    ({}, "sessionId must be a UUID"),
    (new_auth(threadId="nope"), "threadId must be a UUID"),
    (new_auth(clientType=["webapp"]), "clientType must be one of"),
    (new_auth(chatProfile={"a": 1}), "chatProfile must be a string"),
    (new_auth(userEnv="[1]"), "userEnv must be a JSON object"),
]


async def test_bad_auth_gets_connect_error_and_the_socket_can_connect_after(hooks, cookie):
    async with in_process_socket(cookie) as sock:
        for auth, message in BAD_AUTH:
            assert (await sock.refused_connect(auth))["message"].startswith(message), auth
        await sock.connect_namespace()
        await sock.still_usable()


async def test_auth_that_is_not_an_object_gets_connect_error(hooks, cookie):
    async with in_process_socket(cookie) as sock:
        await sock.send_text("40[1, 2]")
        refused = decode(await sock.next_frame())
        assert (refused.packet_type, refused.data) == (
            sio.CONNECT_ERROR,
            {"message": "auth must be an object"},
        )


async def test_a_foreign_thread_or_session_gets_connect_error(hooks, make_user, user, cookie):
    intruder = make_user()
    thread = await thread_of(user)
    async with in_process_socket(cookie) as mine:
        auth = new_auth()
        await mine.connect_namespace(auth)
        async with in_process_socket(await session_cookie(intruder)) as theirs:
            assert await theirs.refused_connect(new_auth(threadId=str(thread.id))) == {
                "message": "authorization failed"
            }
            assert await theirs.refused_connect({**new_auth(), "sessionId": auth["sessionId"]}) == {
                "message": "authorization failed"
            }
        # The owner's session is untouched.
        record = await SocketSession.objects.aget(pk=auth["sessionId"])
        assert record.user_id == user.pk and record.socket_channel
        await mine.still_usable()


async def test_an_api_token_authenticates_in_a_header_or_in_the_auth_payload(hooks, user):
    token = await api_token(user)
    async with in_process_socket(None, headers={"authorization": f"Token {token}"}) as sock:
        await sock.connect_namespace()
    async with in_process_socket(None) as sock:
        await sock.connect_namespace(new_auth(token=token))
    async with in_process_socket(None) as sock:
        assert await sock.refused_connect(new_auth(token="wrong")) == {"message": "authentication failed"}


# --- heartbeat ---------------------------------------------------------------------------


async def test_a_client_ping_gets_a_pong(sock):
    await sock.send_text("2probe")
    assert await sock.next_frame() == "3probe"


async def test_a_client_that_pongs_stays_and_one_that_does_not_is_closed(hooks, settings, cookie):
    settings.SOCKETIO_PING_INTERVAL = 0.1
    settings.SOCKETIO_PING_TIMEOUT = 0.3
    async with in_process_socket(cookie) as healthy:
        await healthy.connect_namespace()
        assert await healthy.nothing_more(0.8) == []
        assert len(healthy.pings) >= 3
        await healthy.still_usable()
    async with in_process_socket(cookie, answer_pings=False) as silent:
        assert await silent.closed(timeout=2) == 4008  # RFC 6455 1008 (policy), mirrored
        assert len(silent.pings) == 1


# --- malformed frames and packets ---------------------------------------------------------


async def test_garbage_gets_an_error_then_a_close_and_later_frames_are_ignored(sock):
    await sock.send_text("hello, is this Engine.IO?")
    (error,) = await sock.event("error")
    assert "not an Engine.IO packet" in error["message"]
    assert await sock.closed() == 4002  # RFC 6455 1002 (protocol error), mirrored
    await sock.send_text("2")
    assert await sock.nothing_more() == []


MALFORMED = [
    ('42["client_message", {"message": ', "malformed packet"),
    ("42" + "[" * 4_000, "malformed packet"),  # too deep (a deeper frame is over its event's budget)
    ("4x[]", "malformed packet"),  # not a packet type
    ("4", "malformed"),  # a MESSAGE with no Socket.IO packet at all
    ('44{"message":"from the client"}', "unsupported packet type"),  # CONNECT_ERROR
    ("47[]", "unsupported packet type"),
]


async def test_malformed_packets_get_an_error_and_the_socket_stays_usable(sock):
    for frame, expected in MALFORMED:
        await sock.send_text(frame)
        (error,) = await sock.event("error")
        assert error["message"].startswith(expected), (frame[:40], error)
    await sock.still_usable()


# Frames that ask for an ack (the id after the type, and after a BINARY_EVENT's attachment
# count) and fail before or while they are parsed; each answer starts with its text.
UNPARSED_CALLS = [
    ('421["client_message", {"message": ', 1, "malformed packet: Expecting value"),
    ('422["chat_settings_change", {"nb": 1' + "0" * 100 + "}]", 2, "malformed packet: Integer is too large"),
    ("423" + "[" * 4_000, 3, "malformed packet: The JSON body is nested deeper than 32 levels."),
    ('424["stop"', 4, "malformed packet"),
    ('451-5["upload",{"_placeholder":true,', 5, "malformed packet"),
    ('42/admin,6["stop"]', 6, "not connected to this namespace"),
    ('42/admin?token=x,7["stop"', 7, "malformed packet"),
]


async def test_every_frame_that_asks_for_an_ack_gets_one_even_when_it_does_not_parse(sock):
    for frame, ack_id, expected in UNPARSED_CALLS:
        await sock.send_text(frame)
        answer = await sock.expect(lambda f, n=ack_id: f.startswith((f"43{n}[", f"43/admin,{n}[")))
        [error] = decode(answer).data
        assert error["error"].startswith(expected), (frame[:40], error)
        assert (await sock.event("error"))[0]["message"] == error["error"]
    answered = [decode(frame) for frame in sock.frames if frame.startswith("43/")]
    assert [(packet.namespace, packet.id) for packet in answered] == [("/admin", 6), ("/admin", 7)]
    await sock.still_usable()


async def test_frames_that_ask_for_no_ack_get_none(sock):
    """An ACK's id answers a call of the server's: a broken one is not answered with an ACK
    (the client would take it for the answer to its own call of that id). An id longer than
    a packet may have (100 digits) is no id."""
    for frame in (
        "435" + "[" * 4_000,
        "436[",
        "42" + "7" * 101 + '["stop"]',
        "42" + "8" * 5_000 + '["stop"]',
    ):
        await sock.send_text(frame)
        assert (await sock.event("error"))[0]["message"].startswith(("malformed packet", "frame of")), frame[
            :20
        ]
    assert not [frame for frame in sock.frames if frame.startswith("43")]
    await sock.still_usable()


async def test_a_frame_over_max_payload_that_asks_for_an_ack_gets_it_before_the_close(
    hooks, settings, cookie
):
    settings.SOCKETIO_MAX_PAYLOAD = 2000
    async with in_process_socket(cookie) as sock:
        await sock.connect_namespace()
        await sock.send_text('429["client_message", "' + "x" * 3000 + '"]')
        [error] = await sock.ack(9)
        assert error["error"] == "frame of 3025 bytes exceeds the limit of 2000"
        assert await sock.closed() == 4009


async def test_empty_and_binary_frames_get_an_error(sock):
    await sock.send_text("")
    assert (await sock.event("error"))[0]["message"] == "empty frame"
    await sock.send_bytes(b"\x04binary")
    assert (await sock.event("error"))[0]["message"] == "binary frames are not supported"
    await sock.send_text('451-7["upload",{"_placeholder":true,"num":0}]')
    assert await sock.ack(7) == [{"error": "binary packets are not supported"}]
    await sock.still_usable()


async def test_event_data_that_is_not_name_and_args_is_refused(sock):
    malformed = "malformed event: expected [name, ...args]"
    for ack_id, data in enumerate(['{"name": "client_message"}', "[]", "[1, 2]", '"client_message"', ""]):
        await sock.send_text(f"42{ack_id}{data}")
        assert await sock.ack(ack_id) == [{"error": malformed}], data
        assert await sock.event("error") == [{"message": malformed, "event": None}]
    await sock.still_usable()


async def test_an_event_before_the_namespace_connect_is_refused(hooks, user, cookie):
    async with in_process_socket(cookie) as sock:
        message = {"message": {"id": str(uuid.uuid4()), "output": "early"}}
        assert await sock.call("client_message", message, ack_id=3) == {
            "error": "not connected to this namespace"
        }
        assert await written_for(user) == (0, 0)
        await sock.connect_namespace()
        await sock.still_usable()


async def test_a_frame_over_max_payload_gets_an_error_then_close_4009(hooks, settings, user, cookie):
    settings.SOCKETIO_MAX_PAYLOAD = 2000
    async with in_process_socket(cookie) as sock:
        await sock.connect_namespace()
        # Counted in bytes, as Engine.IO does: each "€" is 3 of them in UTF-8.
        too_big = {"message": {"id": str(uuid.uuid4()), "output": "€" * 700}}
        frame = "42" + json.dumps(["client_message", too_big], ensure_ascii=False)
        assert len(frame) < 2000 < len(frame.encode())
        await sock.send_text(frame)
        assert "exceeds the limit" in (await sock.event("error"))[0]["message"]
        assert await sock.closed() == 4009  # RFC 6455 1009 (too big), mirrored
    assert await written_for(user) == (0, 0)


async def test_a_frame_bigger_than_its_event_can_need_is_refused_unparsed(hooks, settings, user, cookie):
    """Size before parse: chat settings come in at most 3x their budget (escapes) plus the
    envelope, events with no payload and unknown or escaped names in 4 KiB; the socket stays."""
    settings.CHAT_SETTINGS_MAX_BYTES = 2000
    async with in_process_socket(cookie) as sock:
        await sock.connect_namespace()
        big = {"notes": "x" * 8000}
        answer = await sock.call("chat_settings_change", big, ack_id=1)
        assert answer["error"].endswith("bytes exceeds the limit of 7024 for this event")  # 3 x 2000 + 1024
        (error,) = await sock.event("error")
        assert error["event"] == "chat_settings_change"
        # Within the frame budget, the settings budget answers (after parsing).
        assert (
            "the limit is 2000"
            in (await sock.call("chat_settings_change", {"n": "x" * 3000}, ack_id=2))["error"]
        )
        for name in ("stop", "no_such_event", "\\u0073top"):
            await sock.send_text(f'423["{name}", "{"x" * 5000}"]')
            assert "exceeds the limit of 4096" in (await sock.ack(3))[0]["error"], name
        await sock.still_usable()
    assert await written_for(user) == (0, 0)


async def test_a_disconnect_packet_closes_normally(sock):
    await sock.send_text("41")
    assert await sock.closed() == 1000


async def test_frames_after_a_close_are_ignored(sock):
    await sock.send_text("1")  # Engine.IO CLOSE
    assert await sock.closed() == 1000
    await sock.send_text("2")  # a ping: no pong comes back from a closed socket
    await sock.send_event("chat_settings_change", {}, ack_id=4)
    assert await sock.nothing_more() == []


# --- events -------------------------------------------------------------------------------


async def test_an_unknown_event_gets_an_error_event_and_an_error_ack(sock):
    await sock.send_event("no_such_event", {"x": 1})
    assert await sock.event("error") == [
        {"message": "unknown event 'no_such_event'", "event": "no_such_event"}
    ]
    assert await sock.call("no_such_event", {"x": 1}, ack_id=2) == {"error": "unknown event 'no_such_event'"}
    await sock.still_usable()


async def test_client_message_is_acked_then_confirmed_then_answered(sock, hooks):
    message_id = str(uuid.uuid4())
    answer = await sock.call("client_message", {"message": {"id": message_id, "output": "hi"}}, ack_id=17)
    assert answer["messageId"] == message_id and uuid.UUID(answer["threadId"])
    # The user's own step is confirmed first, then the reply; the turn ends.
    (user_step,) = await sock.event("new_message")
    assert (user_step["type"], user_step["output"]) == ("user_message", "hi")
    # Shown under the id the client chose (its copy is updated, not drawn twice); the step
    # itself is the send's, keyed by the thread, and names the client's id.
    assert user_step["metadata"]["acceptedIds"] == [message_id]
    assert user_step["id"] == message_id
    key = AcceptedMessage.key(uuid.UUID(answer["threadId"]), uuid.UUID(message_id))
    assert await Step.objects.filter(pk=key, type="user_message").aexists()
    assert [m["output"] for m in await sock.event("new_message")] == ["echo: hi"]
    await sock.event("task_end")
    thread = await Thread.objects.aget(pk=answer["threadId"])
    assert thread.name == "hi"


async def test_the_same_message_id_twice_is_one_step_and_one_answer(sock, hooks):
    message = {"message": {"id": str(uuid.uuid4()), "output": "hello"}}
    first = await sock.call("client_message", message, ack_id=1)
    assert await sock.call("client_message", message, ack_id=2) == first
    await sock.seen(lambda f: is_event(f, "task_end"))
    assert await sock.nothing_more(0.3) == []
    assert texts(sock).count("echo: hello") == 1
    key = AcceptedMessage.key(uuid.UUID(first["threadId"]), uuid.UUID(message["message"]["id"]))
    assert await Step.objects.filter(pk=key).acount() == 1


BAD_MESSAGES = [
    ({"message": {"id": "not-a-uuid", "output": "hi"}}, "message.id must be a UUID"),
    ({"message": {"id": str(uuid.uuid4()), "output": 42}}, "message.output must be a string"),
    ({"message": "hi"}, "client_message needs {message: {id, output}}"),
    ("just a string", "client_message needs {message: {id, output}}"),
    (None, "client_message needs {message: {id, output}}"),
]


async def test_a_bad_client_message_is_refused_and_not_stored(sock, user):
    for ack_id, (payload, message) in enumerate(BAD_MESSAGES):
        assert await sock.call("client_message", payload, ack_id=ack_id) == {"error": message}, payload
        assert await sock.event("error") == [{"message": message, "event": "client_message"}]
    assert await written_for(user) == (0, 0)


# --- lifecycle ----------------------------------------------------------------------------


async def test_connection_successful_starts_the_chat_once(hooks, cookie):
    auth = new_auth()
    async with in_process_socket(cookie) as sock:
        await sock.connect_namespace(auth)
        await started(sock)
        await sock.send_event("connection_successful")  # a client that says it twice
        assert await sock.event("task_end") == [None]
        await sock.event("clear_call_fn")  # the last thing connection_successful sends
        assert await sock.nothing_more(0.3) == []
        assert texts(sock) == [GREETING]
    for _ in range(3):  # reconnects of the same session
        async with in_process_socket(cookie) as again:
            await again.connect_namespace(auth)
            await again.send_event("connection_successful")
            assert await again.event("task_end") == [None]
            await again.event("clear_call_fn")
            assert await again.nothing_more(0.2) == []
            assert texts(again) == []
    assert len(hooks.calls(auth["sessionId"], "on_chat_start")) == 1


async def test_clear_session_ends_the_chat_once_and_a_drop_does_not(hooks, cookie):
    auth = new_auth()
    async with in_process_socket(cookie) as sock:
        await sock.connect_namespace(auth)
        await started(sock)
    # The drop above kept the session: no on_chat_end.
    assert hooks.calls(auth["sessionId"], "on_chat_end") == []
    async with in_process_socket(cookie) as sock:
        await sock.connect_namespace(auth)
        assert await sock.call("clear_session", ack_id=1) is None
        # The session is gone: its events are refused until a new sessionId connects.
        assert await sock.call("clear_session", ack_id=2) == {
            "error": "the session was cleared; reconnect with a new sessionId"
        }
    assert len(hooks.calls(auth["sessionId"], "on_chat_end")) == 1
    assert not await SocketSession.objects.filter(pk=auth["sessionId"]).aexists()


async def test_a_second_socket_of_the_session_retires_the_first(hooks, cookie):
    auth = new_auth()
    async with in_process_socket(cookie) as first, in_process_socket(cookie) as second:
        await first.connect_namespace(auth)
        await second.connect_namespace(auth)
        assert await first.closed() == 1000
        await second.still_usable()
    record = await SocketSession.objects.aget(pk=auth["sessionId"])
    assert not record.socket_channel  # the last socket left: the session waits to expire
