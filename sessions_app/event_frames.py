"""The Socket.IO frames the server writes, each event's encoded once where it is emitted.

An event (``new_message`` with a step, ``resume_thread`` with a whole transcript) used to be
encoded by every socket it reached, and once more for the event log. Now ``encode_event``
writes its frame text (``42["event",...]``) once; the emitter logs it, hands it to the local
socket, and sends the same text through the channel layer, so every socket of a group in a
process writes the very same ``str`` (across Redis, msgpack decodes it once per process, and
no JSON is parsed). What differs per socket is added around the encoded text, never by
encoding again: an ack id (an ``ask`` sent as a call) after the packet type, an offset as a
last argument.

``encodings`` counts every packet encoded here, so tests can pin how many a turn costs.
"""

from typing import Any, Final

from socketio import packet as sio

from sessions_app.wire_json import dumps, loads

EVENT_PREFIX: Final = "42"  # Engine.IO MESSAGE, Socket.IO EVENT


class Encodings:
    """How many packets this process encoded (events, acks, connects); tests ``reset()`` it."""

    def __init__(self) -> None:
        self.count = 0

    def reset(self) -> None:
        self.count = 0


encodings = Encodings()


def encode_packet(
    packet_type: int, data: Any, *, namespace: str | None = None, ack_id: int | None = None
) -> str:
    """The text frame of one Socket.IO packet (Engine.IO MESSAGE): the one JSON encoder."""
    encodings.count += 1
    head = f"4{packet_type}"
    if namespace is not None and namespace != "/":
        head += namespace + ","
    if ack_id is not None:
        head += str(ack_id)
    return head if data is None else head + dumps(data)


class EncodedEvent:
    """One event on the root namespace, encoded once: its frame, and its arguments (decoded on
    demand from the frame, once, when it came encoded)."""

    __slots__ = ("_args", "event", "frame")

    def __init__(self, event: str, frame: str, args: list[Any] | None = None) -> None:
        self.event = event
        self.frame = frame  # 42["event",arg,...]
        self._args = args

    @property
    def args(self) -> list[Any]:
        if self._args is None:
            self._args = loads(self.frame[len(EVENT_PREFIX) :])[1:]
        return self._args

    def with_ack_id(self, ack_id: int) -> str:
        """The frame as a call asking for acknowledgement ``ack_id``."""
        return EVENT_PREFIX + str(ack_id) + self.frame[len(EVENT_PREFIX) :]

    def with_offset(self, offset: int) -> "EncodedEvent":
        """The event with its offset (a string, as connection state recovery carries it) as
        an extra last argument."""
        args = None if self._args is None else [*self._args, str(offset)]
        return EncodedEvent(self.event, f'{self.frame[:-1]},"{offset}"]', args)

    def log_entry(self) -> str:
        """The event as the event log keeps it, ``["event",[arg,...]]``, cut from the frame."""
        body = self.frame[len(EVENT_PREFIX) : -1]  # ["event",arg,...  without its bracket
        name_end = _name_end(body)
        return f"{body[:name_end]},[{body[name_end + 1 :]}]]"


def _name_end(body: str) -> int:
    """Where the event's name (a JSON string after ``[``) ends in ``body``."""
    index = 2
    while body[index] != '"':
        index += 2 if body[index] == "\\" else 1
    return index + 1


def encode_event(event: str, args: list[Any]) -> EncodedEvent:
    """Encode an event for every socket it will reach."""
    return EncodedEvent(event, encode_packet(sio.EVENT, [event, *args]), args)


def from_message(message: dict[str, Any]) -> EncodedEvent:
    """The event a channel-layer message carries (``session.emit``, ``thread.event``): its
    frame as it was encoded where it was emitted; a message from a process of an earlier
    release carries the arguments instead (``args``, or ``data`` for the one of a thread)."""
    frame = message.get("frame")
    if frame is not None:
        return EncodedEvent(message["event"], frame)
    args = message["args"] if "args" in message else [message["data"]]
    return encode_event(message["event"], args)
