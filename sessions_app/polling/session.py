"""A polling session: a ``ChatConsumer`` driven by HTTP requests instead of a socket.

The owner process plays the ASGI WebSocket messages to the consumer (``websocket.connect``,
one ``websocket.receive`` per POSTed packet, ``websocket.disconnect`` once when the client
leaves or the session closes) and keeps what the consumer sends in an outgoing list that the
next GET takes whole. After an upgrade (``2probe`` / ``3probe`` / ``5`` on a WebSocket,
direct or relayed from another process) the outgoing packets go to that WebSocket instead.

The session also listens on a channel of its own (the one its sid names), where the other
processes forward the requests that landed on them (``forwarding.serve``).

A client that vanishes stops answering the consumer's pings (they wait in the outgoing list
for a GET that never comes), so the consumer's own heartbeat closes it after pingInterval +
pingTimeout, and its disconnect runs once, as for a WebSocket.
"""

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple, Protocol

from django.conf import settings

from sessions_app.polling.sids import may_use

logger = logging.getLogger(__name__)

# Engine.IO's packet separator in a polling payload.
SEPARATOR = "\x1e"
CLOSE_PACKET = "1"
NOOP_PACKET = "6"
# Packets in one GET's answer, at most: python-engineio's client refuses a payload of more
# than 16 (``Payload.max_decode_packets``) and drops the connection; the rest wait for the
# next GET, which comes at once.
MAX_PACKETS_PER_PAYLOAD = 16
# How long a closed session still answers (its last GET gets the close packet) before its
# sid is unknown.
LINGER = 5.0
# WebSocket close code for a session ended because its client broke Engine.IO's rules.
CLOSE_ABNORMAL = 1006

Scope = dict[str, Any]
Message = dict[str, Any]


class Answer(NamedTuple):
    """An HTTP answer to a polling request."""

    status: int
    body: str
    content_type: str = "text/plain; charset=UTF-8"

    @classmethod
    def error(cls, status: int, code: int, message: str) -> "Answer":
        """Engine.IO's JSON error body (``{"code", "message"}``)."""
        return cls(status, json.dumps({"code": code, "message": message}), "application/json")


UNKNOWN_SID = Answer.error(400, 1, "Session ID unknown")
BAD_REQUEST = Answer.error(400, 3, "Bad request")
OK = Answer(200, "ok")


class WebsocketLink(Protocol):
    """The WebSocket an upgrade arrived on, here or in another process (``upgrade``)."""

    async def send(self, text: str) -> None: ...

    async def close(self, code: int) -> None: ...


class PollingSession:
    """One Engine.IO session served by long-polling (then, maybe, by its upgrade)."""

    def __init__(self, sid: str, channel: str, credential: str) -> None:
        self.sid = sid
        self.channel = channel
        self.credential = credential
        self.outgoing: list[str] = []
        self.wakeup = asyncio.Event()  # data to take, a probe, or the end
        self.inbox: asyncio.Queue[Message] = asyncio.Queue()  # to the consumer
        self.accepted = False
        self.closed = False
        self.upgraded = False
        self.polling = False  # a GET is waiting
        self.link: WebsocketLink | None = None  # an upgrade probing, then the transport
        # The upgrade's probe was answered: the client is pausing its polling, and the GET it
        # may still have on the way must not wait (the probe's wakeup may have come before it).
        self.probed = False
        self._disconnect_played = False
        self.consumer_task: asyncio.Task[None] | None = None
        self.channel_task: asyncio.Task[None] | None = None  # ``forwarding.serve``
        self.on_end: Callable[[PollingSession], None] | None = None

    # --- the consumer's side ------------------------------------------------------------

    def start(self, app: Callable[[Scope, Any, Any], Awaitable[None]], http_scope: Scope) -> None:
        """Run the consumer as if a WebSocket handshake named this session's sid."""
        scope = {
            **http_scope,
            "type": "websocket",
            "scheme": "wss" if http_scope.get("scheme") == "https" else "ws",
            "query_string": b"EIO=4&transport=websocket",
            "subprotocols": [],
            "eio_sid": self.sid,
            "eio_upgrades": ["websocket"],
        }
        self.inbox.put_nowait({"type": "websocket.connect"})
        self.consumer_task = asyncio.create_task(self._run(app, scope))

    async def _run(self, app: Callable[[Scope, Any, Any], Awaitable[None]], scope: Scope) -> None:
        try:
            await app(scope, self._to_consumer, self._from_consumer)
        except Exception:
            logger.exception("polling session %s: its consumer failed", self.sid)
        finally:
            self._end("consumer ended")
            asyncio.get_running_loop().call_later(LINGER, self._forget)

    async def _to_consumer(self) -> Message:
        message = await self.inbox.get()
        self.inbox.task_done()  # taken: a POST waiting for its packets to be taken goes on
        return message

    async def _from_consumer(self, message: Message) -> None:
        kind = message["type"]
        if kind == "websocket.accept":
            self.accepted = True
        elif kind == "websocket.send":
            text = message.get("text")
            if text is not None:
                await self._out(text)
        elif kind == "websocket.close":
            await self._close(int(message.get("code") or 1000))

    async def _out(self, text: str) -> None:
        if self.closed:
            return
        if self.upgraded and self.link is not None:
            await self.link.send(text)
            return
        self.outgoing.append(text)
        self.wakeup.set()

    async def _close(self, code: int) -> None:
        """The session ends (the consumer closed it, or the client broke the rules): the
        client is told (close packet or WebSocket close) and the consumer's disconnect
        runs, once."""
        if self.closed:
            return
        if self.link is not None:  # the upgrade's socket, or a probe's
            link, self.link = self.link, None
            await link.close(code)
        if self.upgraded:
            self.closed = True
        else:
            self.outgoing.append(CLOSE_PACKET)
            self.closed = True
            self.wakeup.set()
        self._play_disconnect(code)

    def _play_disconnect(self, code: int) -> None:
        if not self._disconnect_played:
            self._disconnect_played = True
            self.inbox.put_nowait({"type": "websocket.disconnect", "code": code})

    def _end(self, why: str) -> None:
        if not self.closed:
            logger.debug("polling session %s ends: %s", self.sid, why)
            self.closed = True
            self.wakeup.set()

    def _forget(self) -> None:
        if self.channel_task is not None:
            self.channel_task.cancel()
        if self.on_end is not None:
            self.on_end(self)

    # --- the client's requests ----------------------------------------------------------

    def owns(self, credential: str) -> bool:
        return may_use(credential, self.credential)

    async def handshake(self, timeout: float) -> Answer:
        """The handshake's answer: the consumer's OPEN packet (403 if it refused)."""
        try:
            async with asyncio.timeout(timeout):
                while not self.outgoing and not self.closed:
                    self.wakeup.clear()
                    await self.wakeup.wait()
        except TimeoutError:
            await self._close(CLOSE_ABNORMAL)
        if not self.accepted:
            # As a draining process refuses a WebSocket handshake: nginx then tries another.
            return Answer.error(403, 4, "Forbidden: this server is not accepting connections")
        return Answer(200, SEPARATOR.join(self._take()))

    async def poll(self, credential: str) -> Answer:
        """A GET: what is waiting, or what comes within about a ping interval (a noop when
        nothing does, or when an upgrade's probe releases it). A second GET while one waits
        ends the session, as Engine.IO does."""
        if not self.owns(credential):
            return UNKNOWN_SID
        if self.upgraded:
            return BAD_REQUEST
        if self.polling:
            await self._close(CLOSE_ABNORMAL)
            return BAD_REQUEST
        self.polling = True
        try:
            if not self.outgoing and not self.closed and not self.probed:
                self.wakeup.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wakeup.wait(), settings.SOCKETIO_PING_INTERVAL)
            packets = self._take()
        finally:
            self.polling = False
        if not packets and self.closed:
            return UNKNOWN_SID
        return Answer(200, SEPARATOR.join(packets) or NOOP_PACKET)

    def _take(self) -> list[str]:
        packets = self.outgoing[:MAX_PACKETS_PER_PAYLOAD]
        del self.outgoing[:MAX_PACKETS_PER_PAYLOAD]
        return packets

    async def post(self, credential: str, body: str) -> Answer:
        """A POST: each packet goes to the consumer as a frame would; the answer comes once
        the consumer has taken them all (so a flooding client waits, as on a socket)."""
        if not self.owns(credential):
            return UNKNOWN_SID
        if self.closed or self.upgraded or not body:
            return BAD_REQUEST
        for packet in body.split(SEPARATOR):
            self.inbox.put_nowait({"type": "websocket.receive", "text": packet})
        taken = asyncio.ensure_future(self.inbox.join())
        waits: set[asyncio.Future[Any]] = {taken}
        if self.consumer_task is not None:
            waits.add(self.consumer_task)
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        taken.cancel()
        return OK

    # --- the upgrade ----------------------------------------------------------------------

    def open_websocket(self, credential: str, link: WebsocketLink) -> bool:
        """An upgrade WebSocket for this session; False refuses it."""
        if not self.owns(credential) or self.closed or self.upgraded or self.link is not None:
            return False
        self.link = link
        return True

    async def websocket_frame(self, link: WebsocketLink, text: str) -> None:
        if link is not self.link:
            return
        if self.upgraded:
            self.inbox.put_nowait({"type": "websocket.receive", "text": text})
        elif text == "2probe":
            await link.send("3probe")
            # A waiting GET answers (a noop) so the client can pause polling, and so does one
            # still on its way (python-engineio queues a noop for it).
            self.probed = True
            self.wakeup.set()
        elif text == "5":
            # Everything not yet polled goes to the WebSocket first, in order.
            while self.outgoing:
                batch, self.outgoing = self.outgoing, []
                for packet in batch:
                    await link.send(packet)
            self.upgraded = True
            self.wakeup.set()
        else:
            self.link = None
            self.probed = False
            await link.close(CLOSE_ABNORMAL)

    async def websocket_gone(self, link: WebsocketLink) -> None:
        """The upgrade's WebSocket closed: after the upgrade the client left; during the
        probe, polling goes on as before."""
        if link is not self.link:
            return
        self.link = None
        self.probed = False  # a probe that went nowhere: polling goes on as before
        if self.upgraded and not self.closed:
            self.closed = True
            self._play_disconnect(1000)
