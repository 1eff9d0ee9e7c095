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

And a ``floor`` event, the same payload: what the contract of a hooks-API turn cannot do
without, done as cheaply as this stack allows. The user's message is committed (one INSERT on
psycopg's async pool, no thread hop) before the ack, then the five events Tether pushes per
turn go out (``chat-user-message``, ``task_start``, the user's ``new_message``, the reply's
``new_message`` once its row is committed by a second INSERT, ``task_end``). No ORM, no
session, no hooks, no rate limit, no Redis: if this floor cannot reach a bar on a machine,
nothing built on daphne with Tether's wire protocol can.

The channel layer is the one Tether would use in the same environment (in-memory, or
channels-redis when ``REDIS_URL`` is set), so the consumer carries the same per-socket layer
machinery; no emit goes through it.
"""

import asyncio
import os
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
        # What Tether's channel layer and server wrapper read: no metrics, daphne's text log.
        METRICS_ENABLED=False,
        LOG_FORMAT="text",
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
            elif packet.packet_type == sio.EVENT and packet.data and packet.data[0] == "floor":
                await self.floor(packet.data[1], packet.id)

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
        await self.emit("new_message", self.step(str(uuid.uuid4()), "assistant_message", output, created))

    async def floor(self, payload: dict[str, Any], ack_id: int | None) -> None:
        """One message in: committed, acked, announced, answered and committed (``bench/echo.py``)."""
        context, thread_id = self.context, self.thread_id
        message = payload["message"]
        pool = await floor_pool()
        async with pool.connection() as conn:
            await conn.execute(
                FLOOR_INSERT, (uuid.uuid4(), thread_id, len(context), "user", message["output"])
            )
        context.append(message["output"])
        if ack_id is not None:
            answer = {"threadId": thread_id, "messageId": message["id"], "queued": False}
            await self._send_packet(sio.Packet(sio.ACK, [answer], id=ack_id, binary=False))
        created = datetime.now(UTC).isoformat().replace("+00:00", "Z")
        await self.emit(
            "chat-user-message",
            {
                "threadId": thread_id,
                "messageId": message["id"],
                "text": message["output"],
                "imageCount": 0,
                "author": "bench",
                "acceptedAt": created,
            },
        )
        await self.emit("task_start", None)
        await self.emit("new_message", self.step(message["id"], "user_message", message["output"], created))
        output = f"{len(context)}: {message['output']}"
        step_id = str(uuid.uuid4())
        async with pool.connection() as conn:
            await conn.execute(FLOOR_INSERT, (step_id, thread_id, len(context), "assistant", output))
        context.append(output)
        await self.emit("new_message", self.step(step_id, "assistant_message", output, created))
        await self.emit("task_end", None)

    def step(self, step_id: str, kind: str, output: str, created: str) -> dict[str, Any]:
        return {
            "id": step_id,
            "threadId": self.thread_id,
            "parentId": None,
            "seq": len(self.context),
            "type": kind,
            "name": "assistant" if kind == "assistant_message" else "bench",
            "output": output,
            "content": [],
            "metadata": {},
            "isError": False,
            "streaming": False,
            "createdAt": created,
            "start": created,
            "end": created,
        }


FLOOR_TABLE = (
    "CREATE TABLE IF NOT EXISTS bench_floor_step (id uuid PRIMARY KEY, thread_id uuid NOT NULL,"
    " seq integer NOT NULL, kind text NOT NULL, output text NOT NULL,"
    " created_at timestamptz NOT NULL DEFAULT now())"
)
FLOOR_INSERT = "INSERT INTO bench_floor_step (id, thread_id, seq, kind, output) VALUES (%s, %s, %s, %s, %s)"
_floor: Any = None
_floor_lock = asyncio.Lock()


async def floor_pool() -> Any:
    """psycopg's async pool on ``DATABASE_URL`` (autocommit: each INSERT is its own commit),
    opened at the first ``floor`` event, with the floor's table created."""
    global _floor
    async with _floor_lock:
        if _floor is None:
            from psycopg_pool import AsyncConnectionPool

            pool = AsyncConnectionPool(
                os.environ["DATABASE_URL"], min_size=4, max_size=8, kwargs={"autocommit": True}, open=False
            )
            await pool.open(wait=True)
            async with pool.connection() as conn:
                await conn.execute(FLOOR_TABLE)
                await conn.execute("TRUNCATE bench_floor_step")  # the last run's rows
            _floor = pool
    return _floor


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
