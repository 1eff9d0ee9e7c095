"""The upgrade of a polling session to WebSocket (``transport=websocket&sid=...``).

On the owner the WebSocket becomes the session's transport directly. On any other process
it is relayed: every frame goes to the owner's channel and everything the owner sends comes
back on a channel of this connection's, numbered (``forwarding``). The probe (``2probe`` ->
``3probe``) and the switch (``5``) are the session's to judge, wherever the socket is.
"""

import asyncio
import logging
from typing import Any
from urllib.parse import parse_qs

from channels.layers import get_channel_layer

from sessions_app.polling.endpoint import owned_here
from sessions_app.polling.forwarding import OWNER_TIMEOUT, InOrder
from sessions_app.polling.registry import polling_sessions
from sessions_app.polling.sids import credential_of, owner_channel

logger = logging.getLogger(__name__)


def upgrade_sid(scope: Any) -> str | None:
    """The sid a WebSocket handshake upgrades, if it upgrades one."""
    raw = scope.get("query_string", b"")
    if b"sid=" not in raw:
        return None
    sids = parse_qs(raw.decode("latin-1")).get("sid")
    return sids[0] if sids else None


class LocalLink:
    """The owner's end of a WebSocket it holds itself."""

    def __init__(self, send: Any) -> None:
        self._send = send

    async def send(self, text: str) -> None:
        try:
            await self._send({"type": "websocket.send", "text": text})
        except Exception as exc:
            logger.debug("upgrade socket gone; frame dropped (%r)", exc)

    async def close(self, code: int) -> None:
        try:
            await self._send({"type": "websocket.close", "code": code})
        except Exception as exc:
            logger.debug("close of an upgrade socket failed (%r)", exc)


async def upgrade_app(scope: Any, receive: Any, send: Any) -> None:
    """ASGI app for a WebSocket handshake that names a polling sid."""
    sid = upgrade_sid(scope) or ""
    credential = credential_of(scope)
    connect = await receive()
    if connect["type"] != "websocket.connect":
        return
    session = polling_sessions.get(sid)
    if session is not None:
        link = LocalLink(send)
        if not session.open_websocket(credential, link):
            await send({"type": "websocket.close"})
            return
        await send({"type": "websocket.accept"})
        while True:
            message = await receive()
            if message["type"] == "websocket.receive":
                await session.websocket_frame(link, message.get("text") or "")
            elif message["type"] == "websocket.disconnect":
                await session.websocket_gone(link)
                return
    await _relay(sid, credential, receive, send)


async def _relay(sid: str, credential: str, receive: Any, send: Any) -> None:
    owner = owner_channel(sid)
    layer = get_channel_layer()
    if owner is None or layer is None or owned_here(owner, layer):
        await send({"type": "websocket.close"})
        return
    reply = await layer.new_channel()
    try:
        await layer.send(owner, {"type": "polling.ws_open", "reply": reply, "credential": credential})
        async with asyncio.timeout(OWNER_TIMEOUT):
            opened = await layer.receive(reply)
    except Exception as exc:  # the owner is gone (a timeout) or the layer is down
        logger.info("upgrade of %s refused: no owner answered (%r)", sid[:12], exc)
        await send({"type": "websocket.close"})
        return
    if not opened.get("ok"):
        await send({"type": "websocket.close"})
        return
    await send({"type": "websocket.accept"})
    outgoing = asyncio.create_task(_owner_to_client(layer, reply, send))
    sent = 0
    try:
        while True:
            message = await receive()
            if message["type"] == "websocket.receive":
                frame: dict[str, Any] = {"text": message.get("text") or ""}
            elif message["type"] == "websocket.disconnect":
                frame = {"gone": True}
            else:
                continue
            sent += 1
            await layer.send(owner, {"type": "polling.ws_in", "reply": reply, "seq": sent, **frame})
            if "gone" in frame:
                return
    except Exception as exc:
        logger.warning("relay of %s to its owner failed (%r)", sid[:12], exc)
        await send({"type": "websocket.close"})
    finally:
        outgoing.cancel()


async def _owner_to_client(layer: Any, reply: str, send: Any) -> None:
    order = InOrder()
    while True:
        message = await layer.receive(reply)
        for due in order.arrived(message):
            if "close" in due:
                await send({"type": "websocket.close", "code": due["close"]})
                return
            await send({"type": "websocket.send", "text": due["text"]})
