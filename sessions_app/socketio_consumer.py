"""Socket.IO protocol v5 (Engine.IO 4) over a Channels WebSocket consumer.

Channels owns the connection, authentication and the channel layer; python-socketio's packet
class decodes and ``event_frames`` encodes (orjson, ``wire_json``): an event reaching several
sockets is encoded once and written as the same text to each (``send_event``). This module
knows nothing about chats: subclasses implement ``socketio_connect``, ``socketio_event`` and
``socketio_disconnect``.

Both Engine.IO transports are served, so stock clients connect with their default options.
A WebSocket opened directly is this consumer. A long-polling session (``sessions_app.polling``)
is this consumer too, run by the process that answered its handshake and fed the same ASGI
WebSocket messages from GETs and POSTs (forwarded from any other process: no sticky
sessions); it names its sid in the scope and offers ``upgrades: ["websocket"]``, and after an
upgrade its frames travel on that WebSocket. Everything below (limits, budgets, acks,
heartbeat) is the same for both. Binary attachments are refused with an error.
"""

import logging
import re
import secrets
from typing import Any, NamedTuple, cast
from urllib.parse import parse_qs

from channels.consumer import get_handler_name
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from engineio import packet as eio
from rest_framework.exceptions import ParseError
from socketio import packet as sio

from sessions_app.event_frames import EncodedEvent, encode_event, encode_packet
from sessions_app.heartbeats import heartbeats
from threads_app.parsers import check_shape

logger = logging.getLogger(__name__)

# WebSocket close codes. Daphne closes through autobahn, which lets an application send only
# 1000 or a code in 3000-4999 (anything else raises inside ``close()`` and crashes the
# consumer), so the RFC 6455 codes are mirrored into the private range as 4000 + code.
CLOSE_NORMAL = 1000
CLOSE_PROTOCOL_ERROR = 4002  # RFC 6455 1002, protocol error
CLOSE_POLICY = 4008  # RFC 6455 1008, policy violation (here: a missed pong)
CLOSE_TOO_BIG = 4009  # RFC 6455 1009, message too big
CLOSE_GOING_AWAY = 4001  # RFC 6455 1001, the server is shutting down: reconnect elsewhere

ERROR_EVENT = "error"
# The ack id an EVENT (2) or BINARY_EVENT (5, after its "<attachments>-") asks to be answered
# on: after the type, an optional "/namespace," and up to 100 digits, as python-socketio reads
# it (a longer id is no id: the packet is refused). Other packets' ids are not requests: an
# ACK's id answers a call of the server's.
ACK_REQUEST = re.compile(r"^(?:2|5(?:\d+-)?)(?:(/[^,]*),)?(\d{1,100})(?!\d)")
# The id of a call of the server's an ACK (3) answers, read without parsing the packet.
CALL_ANSWERED = re.compile(r"^3(?:/[^,]*,)?(\d{1,100})(?!\d)")
# An EVENT packet's name as written, read without parsing the packet: after the type digit, an
# optional "/namespace," and an ack id. A name written with escapes is not read.
EVENT_NAME = re.compile(r'2(?:/[^,]*,)?\d*\["([^"\\]*)"')


class AckRequest(NamedTuple):
    """An acknowledgement a client asked for: its id, and the namespace to answer on."""

    id: int
    namespace: str


def _ack_request(encoded: str) -> AckRequest | None:
    """The ack an encoded Socket.IO packet asks for, read without parsing its JSON (None if
    it is not an event or asks for none)."""
    asked = ACK_REQUEST.match(encoded)
    if asked is None:
        return None
    namespace = (asked.group(1) or "/").split("?", 1)[0]  # "/admin?token=x," is /admin
    return AckRequest(int(asked.group(2)), namespace)


class ConnectionRefused(Exception):
    """Raised by ``socketio_connect`` to answer the namespace CONNECT with CONNECT_ERROR."""


class SocketIOConsumer(AsyncWebsocketConsumer):
    """The transport half of the endpoint: handshake, heartbeat, packets, acks."""

    namespace = "/"

    # --- Channels entry points ----------------------------------------------------------

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Channels' dispatch, without its ``aclose_old_connections()`` before every frame
        and channel-layer message: a trip to the sync thread each time, for connections this
        consumer never opens (its database work runs through ``sessions_app.database``, which
        closes obsolete connections around every call on the thread that used them)."""
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def connect(self) -> None:
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        if query.get("EIO") != ["4"] or query.get("transport", ["websocket"]) != ["websocket"]:
            # Engine.IO 3 clients and polling are not served; refuse the handshake.
            await self.close()
            return
        if not self.accepting_connections():
            await self.close()  # refused at the handshake: the client retries elsewhere
            return
        # A long-polling session (``sessions_app.polling``) names its own sid and offers the
        # upgrade; a WebSocket opened directly has nothing to upgrade to.
        polling_sid = cast(str | None, self.scope.get("eio_sid"))
        self.eio_sid: str = polling_sid or secrets.token_urlsafe(15)
        self.sio_sid: str | None = None
        self.closed = False
        self.max_payload = settings.SOCKETIO_MAX_PAYLOAD
        await self.accept()
        await self.send(
            text_data=eio.Packet(
                eio.OPEN,
                {
                    "sid": self.eio_sid,
                    "upgrades": self.scope.get("eio_upgrades", []),
                    "pingInterval": int(settings.SOCKETIO_PING_INTERVAL * 1000),
                    "pingTimeout": int(settings.SOCKETIO_PING_TIMEOUT * 1000),
                    "maxPayload": self.max_payload,
                },
            ).encode()
        )
        heartbeats.watch(self)

    async def disconnect(self, code: int) -> None:
        self.closed = True
        heartbeats.forget(self)
        if getattr(self, "sio_sid", None) is not None:
            self.sio_sid = None
            await self.socketio_disconnect()

    async def go_away(self) -> None:
        """The server is shutting down: end the namespace connection (its disconnect runs
        to completion now) and close, so the client reconnects to another process at once."""
        if self.sio_sid is not None:
            self.sio_sid = None
            await self.socketio_disconnect()
        await self.close(code=CLOSE_GOING_AWAY)

    async def send(  # type: ignore[override]  # AsyncWebsocketConsumer's own signature
        self, text_data: str | None = None, bytes_data: bytes | None = None, close: bool = False
    ) -> None:
        """Write a frame unless the socket is closing or gone. A write to a socket that went
        away is dropped for this socket only: it must never raise into whoever emitted (an
        engine run, a hook, another session's delivery)."""
        if getattr(self, "closed", False):
            return
        try:
            await super().send(text_data=text_data, bytes_data=bytes_data, close=close)
        except Exception as exc:  # autobahn's Disconnected, or a transport already torn down
            logger.debug("socket %s is gone; frame dropped (%r)", getattr(self, "eio_sid", "?"), exc)
            self.closed = True

    async def close(self, code: int | bool | None = None, reason: str | None = None) -> None:
        if getattr(self, "closed", False):
            return
        self.closed = True
        try:
            await super().close(code=code, reason=reason)
        except Exception as exc:
            logger.debug("close of socket %s failed (%r)", getattr(self, "eio_sid", "?"), exc)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.closed:
            return  # frames after a close (or after the server closed) are ignored
        # maxPayload counts bytes, as Engine.IO does: a text frame is measured UTF-8 encoded.
        size = len(bytes_data) if bytes_data is not None else len((text_data or "").encode())
        if size > self.max_payload:
            await self.emit_error(
                f"frame of {size} bytes exceeds the limit of {self.max_payload}",
                ack=_ack_request(text_data[1:] if text_data and text_data[0] == "4" else ""),
            )
            await self.close(code=CLOSE_TOO_BIG)
            return
        if bytes_data is not None:
            await self.emit_error("binary frames are not supported")
            return
        if not text_data:
            await self.emit_error("empty frame")
            return
        kind = text_data[0]
        if kind == "4":
            await self._receive_socketio(text_data[1:], size)
        elif kind == "3":
            heartbeats.pong(self)
        elif kind == "2":
            await self.send(text_data="3" + text_data[1:])
        elif kind == "1":
            await self.close(code=CLOSE_NORMAL)
        elif kind == "6":
            return
        else:
            await self.emit_error("malformed frame: not an Engine.IO packet")
            await self.close(code=CLOSE_PROTOCOL_ERROR)

    # --- Socket.IO packets ---------------------------------------------------------------

    async def _receive_socketio(self, encoded: str, size: int) -> None:
        # Read before parsing, so that a frame that asked for an answer gets one (as an ack)
        # whatever is wrong with it: a client waiting for its ack does not time out.
        ack = _ack_request(encoded)
        event: str | None = None
        if encoded[:1] == "2":  # an EVENT: its frame must fit its event's budget before parsing
            named = EVENT_NAME.match(encoded)
            event = named.group(1) if named else None
            limit = self.event_frame_limit(event)
            if size > limit:
                await self.emit_error(
                    f"frame of {size} bytes exceeds the limit of {limit} for this event", event=event, ack=ack
                )
                return
            if (
                event is not None
                and encoded[1:2] != "/"  # the root namespace's (another's is refused once parsed)
                and self.sio_sid is not None
                and not await self.admit_event(event, ack.id if ack else None)
            ):
                return  # refused (and answered) before it is parsed
        elif encoded[:1] == "3":  # an ACK: only one answering a call this socket awaits is parsed
            answered = CALL_ANSWERED.match(encoded)
            call_id = int(answered.group(1)) if answered else None
            if call_id is None or not self.awaits_ack(call_id):
                await self.emit_error(f"malformed packet: an ACK of no call awaiting one (id {call_id})")
                return
            if not await self.admit_ack(call_id):
                return
        try:
            check_shape(encoded.encode("utf-8", "surrogatepass"))  # the API's JSON budgets
        except ParseError as exc:
            await self.emit_error(f"malformed packet: {exc.detail}", ack=ack)
            return
        try:
            packet = sio.Packet(encoded_packet=encoded)
        except (ValueError, TypeError, RecursionError) as exc:  # RecursionError: deeply nested JSON
            await self.emit_error(f"malformed packet: {exc}", ack=ack)
            return
        namespace = packet.namespace or "/"
        if packet.packet_type in (sio.EVENT, sio.BINARY_EVENT):
            ack = AckRequest(packet.id, namespace) if packet.id is not None else None
        if packet.packet_type == sio.CONNECT:
            await self._namespace_connect(namespace, packet.data)
            return
        if namespace != self.namespace or self.sio_sid is None:
            await self.emit_error("not connected to this namespace", ack=ack)
            return
        ack_id = ack.id if ack else None
        if packet.packet_type == sio.EVENT:
            data = packet.data
            if not isinstance(data, list) or not data or not isinstance(data[0], str):
                await self.emit_error("malformed event: expected [name, ...args]", ack_id=ack_id)
                return
            if event is None and not await self.admit_event(data[0], ack_id):
                return  # a name written with escapes is admitted once it is read
            try:
                await self.socketio_event(data[0], data[1:], ack_id)
            except Exception:
                # A bug must not kill the consumer: that would skip disconnect() and leave the
                # session attached to a dead socket.
                logger.exception("event %r failed on socket %s", data[0], self.eio_sid)
                await self.emit_error("internal server error", event=data[0], ack_id=ack_id)
        elif packet.packet_type == sio.DISCONNECT:
            await self.close(code=CLOSE_NORMAL)
        elif packet.packet_type in (sio.BINARY_EVENT, sio.BINARY_ACK):
            await self.emit_error("binary packets are not supported", ack_id=ack_id)
        elif packet.packet_type == sio.ACK:
            if packet.id is not None:  # the answer to an event sent with ``call``
                await self.socketio_ack(packet.id, packet.data if isinstance(packet.data, list) else [])
        else:
            # CONNECT_ERROR is server-to-client only; other numbers are not packet types.
            await self.emit_error(f"unsupported packet type {packet.packet_type}")

    async def _namespace_connect(self, namespace: str, auth: Any) -> None:
        if namespace != self.namespace:
            await self._send_packet(sio.CONNECT_ERROR, {"message": "Invalid namespace"}, namespace=namespace)
            return
        if self.sio_sid is not None:
            return
        if auth is not None and not isinstance(auth, dict):
            await self._send_packet(sio.CONNECT_ERROR, {"message": "auth must be an object"})
            return
        try:
            extra = await self.socketio_connect(auth or {})
        except ConnectionRefused as refusal:
            await self._send_packet(sio.CONNECT_ERROR, {"message": str(refusal)})
            return
        except Exception:
            logger.exception("namespace CONNECT failed on socket %s", self.eio_sid)
            await self._send_packet(sio.CONNECT_ERROR, {"message": "internal server error"})
            return
        self.sio_sid = secrets.token_urlsafe(15)
        await self._send_packet(sio.CONNECT, {"sid": self.sio_sid, **(extra or {})})
        await self.socketio_connected()

    async def _send_packet(
        self, packet_type: int, data: Any, *, namespace: str | None = None, ack_id: int | None = None
    ) -> None:
        await self.send(text_data=encode_packet(packet_type, data, namespace=namespace, ack_id=ack_id))

    async def emit(self, event: str, *args: Any) -> None:
        """Send an event to this socket."""
        await self.send_event(encode_event(event, list(args)))

    async def send_event(self, encoded: EncodedEvent) -> None:
        """Send an encoded event to this socket: the text every socket it reaches writes."""
        await self.send(text_data=encoded.frame)

    async def call(self, event: str, *args: Any) -> int:
        """Send an event that asks the client for an acknowledgement; returns its ack id (the
        answer arrives in ``socketio_ack``)."""
        return await self.call_encoded(encode_event(event, list(args)))

    async def call_encoded(self, encoded: EncodedEvent) -> int:
        """``call`` for an encoded event (its ack id is put in front of its text)."""
        self._last_call_id = getattr(self, "_last_call_id", 0) + 1
        await self.send(text_data=encoded.with_ack_id(self._last_call_id))
        return self._last_call_id

    async def socketio_ack(self, ack_id: int, args: list[Any]) -> None:
        """The client acknowledged an event sent with ``call``; subclasses use it."""

    async def ack(self, ack_id: int | None, *args: Any, namespace: str | None = None) -> None:
        """Answer a client's acknowledgement request (on ``namespace``, the root's by
        default); a no-op when none was asked for."""
        if ack_id is not None:
            await self._send_packet(sio.ACK, list(args), namespace=namespace, ack_id=ack_id)

    async def emit_error(
        self,
        message: str,
        *,
        event: str | None = None,
        ack_id: int | None = None,
        ack: "AckRequest | None" = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        """Tell the client what was wrong with what it sent; the connection stays usable.
        The ack answers ``ack_id`` on the root namespace, or ``ack`` (a request read from a
        frame that may be for another namespace); ``details`` add fields to its error object."""
        body = {"message": message, "event": event}
        if ack is None and ack_id is not None:
            ack = AckRequest(ack_id, self.namespace)
        if ack is not None:
            await self.ack(ack.id, {"error": message, **(details or {})}, namespace=ack.namespace)
        try:
            await self.emit(ERROR_EVENT, body)
        except Exception:  # the socket may already be closing
            logger.debug("could not emit error %r", message)

    # --- heartbeat -------------------------------------------------------------------------

    async def send_ping(self) -> None:
        await self.send(text_data="2")

    async def ping_timed_out(self) -> None:
        await self.close(code=CLOSE_POLICY)

    # --- for subclasses ----------------------------------------------------------------------

    def accepting_connections(self) -> bool:
        """False while the server shuts down: the handshake is refused."""
        return True

    def event_frame_limit(self, event: str | None) -> int:
        """The largest frame, in bytes, an EVENT packet named ``event`` may come in (None: a
        name that could not be read without parsing); bigger ones are refused unparsed."""
        return int(self.max_payload)

    async def admit_event(self, event: str, ack_id: int | None) -> bool:
        """Whether an EVENT named ``event`` of the connected namespace may be handled; asked
        before its packet is parsed, so a refusal (answered here, e.g. a spent budget) costs
        no decoding. Asked once per packet."""
        return True

    def awaits_ack(self, ack_id: int) -> bool:
        """Whether an ACK with this id answers something this socket sent with ``call``; any
        other ACK is refused (an ``error`` event) before it is parsed."""
        return True

    async def admit_ack(self, ack_id: int) -> bool:
        """Like ``admit_event``, for an awaited ACK (before it is parsed)."""
        return True

    async def socketio_connect(self, auth: dict[str, Any]) -> dict[str, Any] | None:
        """Authorise the namespace CONNECT; raise ConnectionRefused to refuse it. What it
        returns is added to the CONNECT answer's data (beside ``sid``)."""
        return None

    async def socketio_connected(self) -> None:
        """Runs after the CONNECT answer went out."""

    async def socketio_event(self, event: str, args: list[Any], ack_id: int | None) -> None:
        await self.emit_error(f"unknown event {event!r}", event=event, ack_id=ack_id)

    async def socketio_disconnect(self) -> None:
        """The namespace connection ended (client left, close, or missed heartbeat)."""
