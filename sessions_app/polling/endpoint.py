"""The HTTP side of ``/ws/socket.io/``: Engine.IO 4 long-polling (``transport=polling``).

A GET without a sid is a handshake: this process starts the session and owns it. A GET or
POST with a sid is served here when this process owns the session, else forwarded to the
owner (``forwarding``). The Origin is checked as for a WebSocket handshake
(``sessions_app.origin``); the body's size was checked before (``chatproject.body_limits``:
``SOCKETIO_MAX_PAYLOAD``), and each packet meets the consumer's own limits and budgets.
"""

import asyncio
import logging
from typing import Any
from urllib.parse import parse_qs

from channels.layers import get_channel_layer

from sessions_app.auth import SocketAuthMiddleware
from sessions_app.consumers import ChatConsumer
from sessions_app.origin import HandshakeRequest, is_trusted_origin
from sessions_app.polling import forwarding
from sessions_app.polling.registry import polling_sessions
from sessions_app.polling.session import BAD_REQUEST, UNKNOWN_SID, Answer, PollingSession
from sessions_app.polling.sids import credential_of, owner_channel, sid_for

logger = logging.getLogger(__name__)

HANDSHAKE_TIMEOUT = 30.0
# What runs a polling session: the WebSocket endpoint's consumer behind its authentication.
CONSUMER_APP = SocketAuthMiddleware(ChatConsumer.as_asgi())


def owned_here(channel: str, layer: Any) -> bool:
    """Whether ``channel`` is one of this process's (an in-memory layer has no other)."""
    prefix = getattr(layer, "client_prefix", None)
    return prefix is None or f".{prefix}!" in channel


async def _respond(send: Any, answer: Answer) -> None:
    body = answer.body.encode()
    await send(
        {
            "type": "http.response.start",
            "status": answer.status,
            "headers": [
                (b"content-type", answer.content_type.encode()),
                (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"),
                (b"x-content-type-options", b"nosniff"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _read_body(receive: Any) -> bytes | None:
    """The request body, or None if the client left (or its body was over the limit)."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _unless_client_leaves(receive: Any, work: Any) -> Answer | None:
    """Run ``work`` (a GET's wait) unless the client disconnects first (None then)."""
    await receive()  # the (empty) request body
    left = asyncio.ensure_future(receive())
    done_work = asyncio.ensure_future(work)
    await asyncio.wait({left, done_work}, return_when=asyncio.FIRST_COMPLETED)
    if done_work.done():
        left.cancel()
        answer: Answer = done_work.result()
        return answer
    done_work.cancel()
    return None


async def polling_app(scope: Any, receive: Any, send: Any) -> None:
    """ASGI app for HTTP requests to the socket path."""
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    if query.get("EIO") != ["4"]:
        await _respond(send, Answer.error(400, 5, "Unsupported protocol version"))
        return
    if query.get("transport") != ["polling"]:
        await _respond(send, Answer.error(400, 0, "Transport unknown"))
        return
    request = HandshakeRequest(scope)
    origin = request.META.get("HTTP_ORIGIN")
    if origin is not None and not is_trusted_origin(origin, request):
        logger.warning("Refused a polling request from Origin %r", origin)
        await _respond(send, Answer.error(403, 4, "Forbidden"))
        return
    method = scope.get("method")
    sid = query.get("sid", [None])[0]
    credential = credential_of(scope)
    if sid is None:
        if method != "GET":
            await _respond(send, Answer.error(400, 2, "Bad handshake method"))
            return
        await _respond(send, await _handshake(scope, credential))
        return
    if method == "GET":
        answer = await _unless_client_leaves(receive, _get(sid, credential))
        if answer is not None:
            await _respond(send, answer)
        return
    if method == "POST":
        body = await _read_body(receive)
        if body is None:
            return  # gone, or refused by the body limit (which answers)
        try:
            text = body.decode()
        except UnicodeDecodeError:
            await _respond(send, BAD_REQUEST)
            return
        await _respond(send, await _post(sid, credential, text))
        return
    await _respond(send, BAD_REQUEST)


async def _handshake(scope: Any, credential: str) -> Answer:
    layer = get_channel_layer()
    assert layer is not None
    channel = await layer.new_channel()
    session = PollingSession(sid_for(channel), channel, credential)
    polling_sessions.add(session)
    session.start(CONSUMER_APP, scope)
    session.channel_task = asyncio.create_task(forwarding.serve(session, layer))
    return await session.handshake(HANDSHAKE_TIMEOUT)


async def _get(sid: str, credential: str) -> Answer:
    session = polling_sessions.get(sid)
    if session is not None:
        return await session.poll(credential)
    return await _forwarded(sid, {"type": "polling.get", "credential": credential}, forwarding.get_timeout())


async def _post(sid: str, credential: str, body: str) -> Answer:
    session = polling_sessions.get(sid)
    if session is not None:
        return await session.post(credential, body)
    message = {"type": "polling.post", "credential": credential, "body": body}
    return await _forwarded(sid, message, forwarding.OWNER_TIMEOUT)


async def _forwarded(sid: str, message: dict[str, Any], timeout: float) -> Answer:
    owner = owner_channel(sid)
    layer = get_channel_layer()
    if owner is None or layer is None or owned_here(owner, layer):
        return UNKNOWN_SID
    return await forwarding.forward(layer, owner, message, timeout)
