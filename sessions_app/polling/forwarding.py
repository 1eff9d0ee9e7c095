"""Polling requests that landed on a process other than the session's owner.

The forwarding process sends the request to the owner's channel (the one the sid names) with
a reply channel of its own, and answers its client with what comes back. An upgrade
WebSocket is relayed both ways in numbered messages, put back in order on arrival: the
channel layer does not promise the order of messages sent from concurrent tasks.

Messages (``type``): ``polling.get`` / ``polling.post`` -> ``polling.answer``;
``polling.ws_open`` -> ``polling.ws_opened``, then ``polling.ws_in`` (client to owner) and
``polling.ws_out`` (owner to client), each with ``seq`` and ``text``, or ``gone`` / ``close``.
"""

import asyncio
import logging
from typing import Any

from django.conf import settings

from sessions_app.polling.session import UNKNOWN_SID, Answer, PollingSession

logger = logging.getLogger(__name__)

# How long a forwarded POST (or an upgrade's opening) waits for the owner; a dead owner's
# session is then unknown.
OWNER_TIMEOUT = 10.0


class InOrder:
    """Puts numbered messages back in the order they were numbered."""

    def __init__(self) -> None:
        self.next = 1
        self.early: dict[int, dict[str, Any]] = {}

    def arrived(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        """The messages now due, in order (none when ``message`` came early)."""
        self.early[int(message["seq"])] = message
        due = []
        while self.next in self.early:
            due.append(self.early.pop(self.next))
            self.next += 1
        return due


class RelayedLink:
    """The owner's end of a WebSocket held by another process."""

    def __init__(self, layer: Any, reply: str) -> None:
        self.layer = layer
        self.reply = reply
        self.sent = 0
        self.incoming = InOrder()

    async def _send(self, message: dict[str, Any]) -> None:
        self.sent += 1  # numbered before any await: the order of the calls
        message["seq"] = self.sent
        try:
            await self.layer.send(self.reply, {"type": "polling.ws_out", **message})
        except Exception as exc:
            logger.warning("relay to %s failed (%r)", self.reply, exc)

    async def send(self, text: str) -> None:
        await self._send({"text": text})

    async def close(self, code: int) -> None:
        await self._send({"close": code})


class OwnerSide:
    """What a session's owner does with the messages other processes forward to it."""

    def __init__(self, session: PollingSession, layer: Any) -> None:
        self.session = session
        self.layer = layer
        self.links: dict[str, RelayedLink] = {}
        self.tasks: set[asyncio.Task[None]] = set()

    async def handle(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind in ("polling.get", "polling.post"):
            # A GET waits; it must not hold up the messages behind it.
            task = asyncio.create_task(self._answer(message))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        elif kind == "polling.ws_open":
            await self._open(message)
        elif kind == "polling.ws_in":
            await self._frame(message)

    async def _answer(self, message: dict[str, Any]) -> None:
        if message["type"] == "polling.get":
            answer = await self.session.poll(message["credential"])
        else:
            answer = await self.session.post(message["credential"], message["body"])
        await self._reply(message["reply"], {"type": "polling.answer", **answer._asdict()})

    async def _open(self, message: dict[str, Any]) -> None:
        link = RelayedLink(self.layer, message["reply"])
        opened = self.session.open_websocket(message["credential"], link)
        if opened:
            self.links[message["reply"]] = link
        await self._reply(message["reply"], {"type": "polling.ws_opened", "ok": opened})

    async def _frame(self, message: dict[str, Any]) -> None:
        link = self.links.get(message.get("reply", ""))
        if link is None:
            return
        for due in link.incoming.arrived(message):
            if due.get("gone"):
                self.links.pop(link.reply, None)
                await self.session.websocket_gone(link)
            else:
                await self.session.websocket_frame(link, due["text"])

    async def _reply(self, channel: str, message: dict[str, Any]) -> None:
        try:
            await self.layer.send(channel, message)
        except Exception as exc:
            logger.warning("polling answer to %s failed (%r)", channel, exc)


async def serve(session: PollingSession, layer: Any) -> None:
    """The owner's side: what arrives on the session's channel, until the session ends."""
    owner = OwnerSide(session, layer)
    while True:
        try:
            message = await layer.receive(session.channel)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the layer is down: try again shortly
            logger.warning("polling session %s: receive failed (%r)", session.sid[:12], exc)
            await asyncio.sleep(0.5)
            continue
        await owner.handle(message)


async def forward(layer: Any, owner: str, message: dict[str, Any], timeout: float) -> Answer:
    """Send a GET or POST to the owner and wait for its answer (unknown sid if none)."""
    reply = await layer.new_channel()
    try:
        await layer.send(owner, {**message, "reply": reply})
        async with asyncio.timeout(timeout):
            answered = await layer.receive(reply)
    except TimeoutError:
        return UNKNOWN_SID
    except Exception as exc:
        logger.warning("forwarding a polling request to %s failed (%r)", owner, exc)
        return UNKNOWN_SID
    return Answer(answered["status"], answered["body"], answered["content_type"])


def get_timeout() -> float:
    """A forwarded GET waits the owner's longest wait, and some."""
    return float(settings.SOCKETIO_PING_INTERVAL) + OWNER_TIMEOUT
