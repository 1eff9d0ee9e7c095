"""Engine.IO 4 / Socket.IO v5 frames by hand, over a real daphne or in this process.

What an unmodified python-socketio client cannot send (garbage, broken JSON, binary frames,
events before the namespace CONNECT, a client that never answers pings) needs a bare socket.
``RawSocket`` is one over aiohttp to a live server; ``InProcessSocket`` drives the real ASGI
application through Channels' ``WebsocketCommunicator``, with no server: fast, and a
breakpoint in the consumer stops the test's own stack. Both read frames the same way
(``FrameSocket``), so a test reads alike against either.
"""

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any, cast

import aiohttp
from channels.testing import WebsocketCommunicator
from socketio import packet as sio

EIO4 = "EIO=4&transport=websocket"
SOCKET_PATH = "/ws/socket.io/"


class Closed(Exception):
    """The server closed the socket; ``code`` is the WebSocket close code."""

    def __init__(self, code: int | None) -> None:
        super().__init__(f"socket closed with code {code}")
        self.code = code


def decode(frame: str) -> sio.Packet:
    """The Socket.IO packet inside an Engine.IO MESSAGE frame."""
    assert frame[0] == "4", f"not an Engine.IO MESSAGE: {frame!r}"
    return sio.Packet(encoded_packet=frame[1:])


def new_auth(**fields: Any) -> dict[str, Any]:
    """The auth payload the web client sends on the namespace CONNECT, for a new session."""
    return {"sessionId": str(uuid.uuid4()), "clientType": "webapp", "userEnv": "{}", **fields}


class FrameSocket:
    """Frames in and out of one Engine.IO socket; nothing is done for the test but pongs.

    Subclasses say how a text frame is sent (``send_text``) and received (``_receive``, which
    raises ``Closed`` when the server closes)."""

    def __init__(self, *, answer_pings: bool = True) -> None:
        self.answer_pings = answer_pings
        self.pings: list[float] = []
        self.frames: list[str] = []
        self.open: dict[str, Any] = {}

    async def send_text(self, text: str) -> None:
        raise NotImplementedError

    async def _receive(self, timeout: float) -> str:
        raise NotImplementedError

    async def next_frame(self, timeout: float = 5) -> str:
        """The next text frame other than a ping (pings are recorded, and answered if asked)."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            frame = await self._receive(remaining)
            if frame == "2":
                self.pings.append(time.monotonic())
                if self.answer_pings:
                    await self.send_text("3")
                continue
            self.frames.append(frame)
            return frame

    async def expect(self, matches: Callable[[str], bool], timeout: float = 5) -> str:
        """The next frame that ``matches`` (the ones before it are read and kept)."""
        deadline = time.monotonic() + timeout
        while True:
            frame = await self.next_frame(deadline - time.monotonic())
            if matches(frame):
                return frame

    async def seen(self, matches: Callable[[str], bool], timeout: float = 5) -> str:
        """A frame that ``matches``, among those already read (``expect`` passes over the
        ones it does not want) or else the next ones."""
        for frame in self.frames:
            if matches(frame):
                return frame
        return await self.expect(matches, timeout)

    async def event(self, name: str, timeout: float = 5) -> list[Any]:
        """Wait for an EVENT named ``name`` on ``/``; return its arguments."""

        def is_it(frame: str) -> bool:
            return frame.startswith("42") and decode(frame).data[0] == name

        return cast(list[Any], decode(await self.expect(is_it, timeout)).data[1:])

    async def ack(self, ack_id: int, timeout: float = 5) -> list[Any]:
        """Wait for the ACK packet answering ``ack_id``; return its arguments."""
        frame = await self.expect(lambda f: f.startswith(f"43{ack_id}["), timeout)
        packet = decode(frame)
        assert packet.id == ack_id
        return cast(list[Any], packet.data)

    async def closed(self, timeout: float = 5) -> int | None:
        """Read (and keep) frames until the server closes; return the close code."""
        try:
            await self.expect(lambda _frame: False, timeout)
        except Closed as closed:
            return closed.code
        raise AssertionError("unreachable")

    async def handshake(self) -> dict[str, Any]:
        """Read the Engine.IO open packet (the first frame the server sends)."""
        frame = await self.next_frame()
        assert frame[0] == "0", f"expected the Engine.IO open packet, got {frame!r}"
        self.open = json.loads(frame[1:])
        return self.open

    async def connect_namespace(self, auth: dict[str, Any] | None = None) -> str:
        """Send the namespace CONNECT for ``/``; return the Socket.IO sid of the answer."""
        await self.send_text("40" + json.dumps(auth if auth is not None else new_auth()))
        frame = await self.expect(lambda f: f.startswith(("40", "44")))
        assert frame.startswith("40{"), f"namespace CONNECT refused: {frame!r}"
        return cast(str, json.loads(frame[2:])["sid"])

    async def refused_connect(self, auth: dict[str, Any] | None) -> dict[str, Any]:
        """Send a namespace CONNECT that must be refused; return the CONNECT_ERROR's data."""
        await self.send_text("40" + (json.dumps(auth) if auth is not None else ""))
        refused = decode(await self.expect(lambda f: f.startswith(("40", "44"))))
        assert refused.packet_type == sio.CONNECT_ERROR, f"CONNECT was accepted: {refused.data!r}"
        return cast(dict[str, Any], refused.data)

    async def send_event(self, event: str, *args: Any, ack_id: int | None = None) -> None:
        packet = sio.Packet(sio.EVENT, [event, *args], id=ack_id, binary=False)
        await self.send_text("4" + packet.encode())

    async def call(self, event: str, *args: Any, ack_id: int = 1, timeout: float = 5) -> Any:
        """Send an event asking for an ACK; return the ACK's single argument."""
        await self.send_event(event, *args, ack_id=ack_id)
        (answer,) = await self.ack(ack_id, timeout)
        return answer

    async def still_usable(self, ack_id: int = 99) -> None:
        """The socket still answers: an acknowledged event gets its ACK. (``chat_settings_change``
        runs no hook that could outlive the test and race the database flush.)"""
        await self.send_event("chat_settings_change", {}, ack_id=ack_id)
        assert await self.ack(ack_id) == [None]


class RawSocket(FrameSocket):
    """A bare WebSocket to a live daphne (``ws`` is aiohttp's, for binary frames and the like)."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, *, answer_pings: bool = True) -> None:
        super().__init__(answer_pings=answer_pings)
        self.ws = ws

    async def send_text(self, text: str) -> None:
        await self.ws.send_str(text)

    async def _receive(self, timeout: float) -> str:
        message = await self.ws.receive(timeout)
        if message.type == aiohttp.WSMsgType.TEXT:
            return cast(str, message.data)
        if message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSING, aiohttp.WSMsgType.CLOSED):
            raise Closed(self.ws.close_code)
        raise AssertionError(f"unexpected frame {message!r}")


@asynccontextmanager
async def raw_socket(
    server: Any, cookie: str | None, *, query: str = EIO4, answer_pings: bool = True
) -> AsyncIterator[RawSocket]:
    """A ``RawSocket`` to ``server`` (a ``LiveServer``), sending ``cookie`` if given."""
    headers = {"Cookie": cookie} if cookie else {}
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(
            f"ws://127.0.0.1:{server.port}{SOCKET_PATH}?{query}", headers=headers, heartbeat=None
        ) as ws,
    ):
        yield RawSocket(ws, answer_pings=answer_pings)


class InProcessSocket(FrameSocket):
    """A WebSocket to ``chatproject.asgi.application`` in this process (origin check, cookie
    and token authentication, routing, ``ChatConsumer``), through ``WebsocketCommunicator``."""

    def __init__(
        self,
        cookie: str | None = None,
        *,
        query: str = EIO4,
        headers: dict[str, str] | None = None,
        answer_pings: bool = True,
    ) -> None:
        super().__init__(answer_pings=answer_pings)
        from chatproject.asgi import application  # Django is set up by then

        all_headers = dict(headers or {})
        if cookie:
            all_headers["cookie"] = cookie
        self.communicator = WebsocketCommunicator(
            application,
            f"{SOCKET_PATH}?{query}",
            headers=[(name.lower().encode(), value.encode()) for name, value in all_headers.items()],
        )
        self.left = False

    async def accept(self, timeout: float = 5) -> bool:
        """The WebSocket handshake: True if the application accepted it."""
        accepted, _ = await self.communicator.connect(timeout)
        return bool(accepted)

    async def send_text(self, text: str) -> None:
        await self.communicator.send_input({"type": "websocket.receive", "text": text})

    async def send_bytes(self, data: bytes) -> None:
        await self.communicator.send_input({"type": "websocket.receive", "bytes": data})

    async def _receive(self, timeout: float) -> str:
        # Read the queue directly: the communicator's own receive cancels the application on a
        # timeout, and a test that waits for "nothing more" must not kill the consumer.
        application = self.communicator.future
        frame = asyncio.ensure_future(self.communicator.output_queue.get())
        done, _ = await asyncio.wait(
            {frame, application}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if frame not in done:
            frame.cancel()
            if application.done():
                application.result()  # the consumer crashed: raise its exception here
                raise AssertionError("the application ended without closing the socket")
            raise TimeoutError
        message = frame.result()
        if message["type"] == "websocket.close":
            raise Closed(message.get("code", 1000))
        assert message["type"] == "websocket.send" and "text" in message, message
        return cast(str, message["text"])

    async def nothing_more(self, seconds: float = 0.2) -> list[str]:
        """Frames (pings aside) that arrive within ``seconds``: a test asserts it is empty."""
        received: list[str] = []
        deadline = time.monotonic() + seconds
        with suppress(TimeoutError):
            while (remaining := deadline - time.monotonic()) > 0:
                received.append(await self.next_frame(remaining))
        return received

    async def leave(self, code: int = 1000) -> None:
        """The client goes away (a tab closed, a network drop): the consumer's ``disconnect``
        runs to completion."""
        if not self.left:
            self.left = True
            await self.communicator.disconnect(code, timeout=10)


@asynccontextmanager
async def in_process_socket(
    cookie: str | None, *, query: str = EIO4, **kwargs: Any
) -> AsyncIterator[InProcessSocket]:
    """An accepted ``InProcessSocket`` whose open packet was read; it leaves at the end."""
    sock = InProcessSocket(cookie, query=query, **kwargs)
    assert await sock.accept(), "the WebSocket handshake was refused"
    try:
        await sock.handshake()
        yield sock
    finally:
        await sock.leave()
