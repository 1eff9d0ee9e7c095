"""The baseline for ``bench/stream.py`` and ``bench/echo.py``: a bare Channels consumer
speaking just enough Socket.IO v5 (Engine.IO 4, WebSocket transport) to stream tokens to an
unmodified python-socketio ``AsyncClient``.

    daphne bench.baseline_asgi:application

It answers the Engine.IO open and the namespace CONNECT the way
``sessions_app/socketio_consumer.py`` does (python-socketio's packet classes for the
encoding), and on a ``go`` event ``{id, text}`` it emits, back to back with direct sends and
nothing else in between, the reply Tether's engine runtime would stream for that text:
``stream_start``, one ``stream_token {id, token, isSequence, isInput}`` per word (the first
word bare, every later one with its leading space, as the echo engine splits it),
``update_message {id, output}`` and ``task_end``. No database, no auth, no hooks: what is
left is daphne, Channels and the packet encoding, the floor Tether's stream path sits on.

For ``bench/echo.py`` it also answers an ``echo`` event, whose payload is a ``client_message``
one (``{message: {id, output}}``): it acks ``{threadId, messageId, queued}`` as Tether does and
emits one ``new_message`` with an assistant StepDict whose output is
``"<context length>: <output>"``, the context being this socket's messages held in memory (the
user's message counted before the reply, as Tether's ``chat_context`` counts it). No
``task_start``/``task_end``, no user step echoed back, no database.

The channel layer is the one Tether would use in the same environment (in-memory, or
channels-redis when ``REDIS_URL`` is set), so the consumer carries the same per-socket layer
machinery; no emit goes through it.
"""

import secrets
import uuid
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs

from django.conf import settings

if not settings.configured:
    from chatproject import settings as tether_settings

    settings.configure(
        SECRET_KEY="tether-bench-baseline",
        ALLOWED_HOSTS=["*"],
        CHANNEL_LAYERS=tether_settings.CHANNEL_LAYERS,
    )

from channels.generic.websocket import AsyncWebsocketConsumer
from channels.routing import ProtocolTypeRouter, URLRouter
from django.urls import path
from engineio import packet as eio
from socketio import packet as sio


class BaselineConsumer(AsyncWebsocketConsumer):
    context: list[str]  # this socket's messages, for ``echo``
    thread_id: str

    async def connect(self) -> None:
        self.context = []
        self.thread_id = str(uuid.uuid4())
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        if query.get("EIO") != ["4"]:
            await self.close()
            return
        await self.accept()
        await self.send(
            text_data=eio.Packet(
                eio.OPEN,
                {
                    "sid": secrets.token_urlsafe(15),
                    "upgrades": [],
                    "pingInterval": 25000,
                    "pingTimeout": 20000,
                    "maxPayload": 1_000_000,
                },
            ).encode()
        )

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if not text_data:
            return
        kind = text_data[0]
        if kind == "2":
            await self.send(text_data="3" + text_data[1:])
        elif kind == "1":
            await self.close()
        elif kind == "4":
            packet = sio.Packet(encoded_packet=text_data[1:])
            if packet.packet_type == sio.CONNECT:
                await self._send_packet(sio.Packet(sio.CONNECT, {"sid": secrets.token_urlsafe(15)}))
            elif packet.packet_type == sio.DISCONNECT:
                await self.close()
            elif packet.packet_type == sio.EVENT and packet.data and packet.data[0] == "go":
                await self.stream(packet.data[1])
            elif packet.packet_type == sio.EVENT and packet.data and packet.data[0] == "echo":
                await self.echo(packet.data[1], packet.id)

    async def _send_packet(self, packet: sio.Packet) -> None:
        await self.send(text_data="4" + packet.encode())

    async def emit(self, event: str, *args: Any) -> None:
        await self._send_packet(sio.Packet(sio.EVENT, [event, *args], binary=False))

    async def stream(self, request: dict[str, Any]) -> None:
        step_id, text = request["id"], request["text"]
        await self.emit("stream_start", {"id": step_id, "output": "", "streaming": True})
        for index, word in enumerate(text.split(" ")):
            await self.emit(
                "stream_token",
                {
                    "id": step_id,
                    "token": word if index == 0 else " " + word,
                    "isSequence": False,
                    "isInput": False,
                },
            )
        await self.emit("update_message", {"id": step_id, "output": text, "streaming": False})
        await self.emit("task_end", None)

    async def echo(self, payload: dict[str, Any], ack_id: int | None) -> None:
        """One message in, its ack and one ``new_message`` out (``bench/echo.py``)."""
        context, thread_id = self.context, self.thread_id
        message = payload["message"]
        context.append(message["output"])
        output = f"{len(context)}: {message['output']}"
        context.append(output)
        if ack_id is not None:
            answer = {"threadId": thread_id, "messageId": message["id"], "queued": False}
            await self._send_packet(sio.Packet(sio.ACK, [answer], id=ack_id, binary=False))
        created = datetime.now(UTC).isoformat().replace("+00:00", "Z")
        await self.emit(
            "new_message",
            {
                "id": str(uuid.uuid4()),
                "threadId": thread_id,
                "parentId": None,
                "seq": len(context),
                "type": "assistant_message",
                "name": "assistant",
                "output": output,
                "content": [],
                "metadata": {},
                "isError": False,
                "streaming": False,
                "createdAt": created,
                "start": created,
                "end": created,
            },
        )


async def http_ok(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Any HTTP request: 200, so the benchmark can tell the server is up."""
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"ok"})


application = ProtocolTypeRouter(
    {
        "http": http_ok,
        # An ASGI app in path(), as Channels allows; types-channels wants its check-only _ExtendedURLPattern.
        "websocket": URLRouter([path("ws/socket.io/", BaselineConsumer.as_asgi())]),  # type: ignore[list-item, arg-type]
    }
)
