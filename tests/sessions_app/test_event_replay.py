"""Event offsets and replay (DESIGN.md section 10): a client that asked for offsets and comes
back after a drop mid-reply gets every event it missed, in order, before anything new, each
once, and a flag saying whether the window covered the gap. Against real daphnes, for both
kinds of app, through a proxy that drops or resets the connection."""

import asyncio
import uuid
from typing import Any

import pytest
import socketio

from tests.support.client import user_cookie
from tests.support.proxy import FaultProxy

pytestmark = [pytest.mark.fault, pytest.mark.django_db(transaction=True)]

TOKENS = 40


class OffsetClient:
    """A python-socketio client that asks for offsets and keeps what a recovering client keeps:
    the last offset it saw; it records every session event with its offset."""

    def __init__(self, url: str, cookie: str) -> None:
        self.url = url
        self.cookie = cookie
        self.session_id = str(uuid.uuid4())
        self.offset: str | None = None
        self.events: list[tuple[str, Any, int | None]] = []  # (event, data, offset)
        self.recoveries: list[dict[str, Any]] = []
        self.sio: socketio.AsyncClient | None = None

    async def connect(self) -> None:
        sio = socketio.AsyncClient(reconnection=False)

        async def record(event: str, *args: Any) -> None:
            if event == "connection_recovery":
                self.recoveries.append(args[0])
                return
            offset = None
            if args and isinstance(args[-1], str) and args[-1].isdigit():
                offset = int(args[-1])
                self.offset = args[-1]
                args = args[:-1]
            self.events.append((event, args[0] if args else None, offset))

        sio.on("*", record)
        auth: dict[str, Any] = {"sessionId": self.session_id, "offsets": True}
        if self.offset is not None:
            auth["offset"] = self.offset
        self.sio = sio
        await sio.connect(
            self.url,
            headers={"Cookie": self.cookie},
            auth=auth,
            transports=["websocket"],
            socketio_path="/ws/socket.io",
            wait_timeout=10,
        )
        await sio.emit("connection_successful")

    async def send(self, text: str) -> dict[str, Any]:
        assert self.sio is not None
        answer: dict[str, Any] = await self.sio.call(
            "client_message", {"message": {"id": str(uuid.uuid4()), "output": text}}, timeout=10
        )
        return answer

    async def gone(self) -> None:
        """Wait until the client noticed that its connection is gone."""
        assert self.sio is not None
        for _ in range(200):
            if not self.sio.connected:
                break
            await asyncio.sleep(0.05)
        await self.sio.disconnect()
        await self.sio.shutdown()

    async def close(self) -> None:
        if self.sio is not None:
            await self.sio.disconnect()

    def tokens(self) -> str:
        return "".join(data["token"] for event, data, _ in self.events if event == "stream_token")

    def offsets(self) -> list[int]:
        return [offset for _, _, offset in self.events if offset is not None]

    async def wait(self, predicate: Any, timeout: float = 20) -> None:
        for _ in range(int(timeout / 0.05)):
            if predicate():
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"timed out; events: {self.events[-5:]} recoveries: {self.recoveries}")


def streamed_reply(kind: str) -> tuple[str, str]:
    """The message that makes each app stream ``TOKENS`` tokens slowly, and the reply text."""
    if kind == "hooks":
        return f"slowstream {TOKENS} 0.03", "".join(f"t{i} " for i in range(TOKENS))
    words = " ".join(f"w{i}" for i in range(TOKENS))
    return f"!slow 0.03\n{words}", f"Echo #1: {words}"


@pytest.fixture(params=["hooks", "engine"])
def kind(request) -> str:
    return str(request.param)


@pytest.fixture
def app_server(kind, server, engine_server):
    return server if kind == "hooks" else engine_server


async def drop_mid_reply(
    kind: str, proxy: FaultProxy, app_server: Any, user: Any, fault: str, away: float
) -> OffsetClient:
    """A client streaming a reply through ``proxy`` loses its connection (``fault``) after a
    few tokens and reconnects ``away`` seconds later with the last offset it saw."""
    message, _reply = streamed_reply(kind)
    client = OffsetClient(proxy.url, await user_cookie(app_server.url, user))
    await client.connect()
    await client.send(message)
    await client.wait(lambda: client.tokens().count(" ") >= 5)
    getattr(proxy, fault)()
    await client.gone()
    await asyncio.sleep(away)  # tokens go on while the client is away
    await client.connect()
    return client


def ended(client: OffsetClient) -> bool:
    return any(event == "task_end" for event, _, _ in client.events[-3:])


@pytest.mark.parametrize("fault", ["drop", "reset"])
async def test_a_drop_mid_reply_is_recovered_with_every_event_once_and_in_order(
    kind, app_server, make_user, fault
):
    _message, reply = streamed_reply(kind)
    with FaultProxy([app_server.port]) as proxy:
        client = await drop_mid_reply(kind, proxy, app_server, make_user(), fault, away=0.5)
        await client.wait(lambda: ended(client) and len(client.recoveries) == 2)
        assert client.recoveries[-1]["recovered"] is True
        # Every token once, in order: the reply is whole, as if the connection never dropped.
        assert client.tokens() == reply
        offsets = client.offsets()
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), "a gap or a duplicate"
        await client.close()


async def test_a_gap_the_window_no_longer_covers_says_so(server_factory, make_user):
    small = server_factory.start(EVENT_REPLAY_MAX_EVENTS="5")
    with FaultProxy([small.port]) as proxy:
        client = await drop_mid_reply("hooks", proxy, small, make_user(), "drop", away=0.6)
        await client.wait(lambda: len(client.recoveries) == 2)
        assert client.recoveries[-1]["recovered"] is False
        # What comes after is delivered live, numbered on from the session's newest offset.
        await client.wait(lambda: ended(client))
        after = [o for o in client.offsets() if o > int(client.recoveries[-1]["offset"])]
        assert after and after == list(range(after[0], after[0] + len(after)))
        await client.close()
