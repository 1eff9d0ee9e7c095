"""A socket whose frames pile up for the application is not read until the application
caught up (``chatproject.serve.TetherWebSocketProtocol``), so a flood's frames wait in its
client's TCP buffers, not in the server's memory. Against daphne's protocol object with a
stand-in transport; the flood tests (``tests/sessions_app/test_input_floods.py``) measure the
memory against a real daphne. The same for uvicorn's protocol (``chatproject.serve_uvicorn``)."""

import asyncio
import logging
from typing import Any

from websockets.frames import Frame, Opcode

from chatproject.serve import TetherWebSocketProtocol
from chatproject.serve_uvicorn import TetherWebSocketsProtocol
from chatproject.servers import RECEIVE_HIGH_WATER


class Transport:
    disconnected = False

    def __init__(self) -> None:
        self.paused = 0
        self.resumed = 0

    def pauseProducing(self) -> None:  # twisted's names
        self.paused += 1

    def resumeProducing(self) -> None:
        self.resumed += 1


def protocol() -> TetherWebSocketProtocol:
    made = TetherWebSocketProtocol.__new__(TetherWebSocketProtocol)
    made.muted = False
    made.client_addr = ("127.0.0.1", 1)
    made.transport = Transport()
    made.application_queue = asyncio.Queue()
    return made


def test_reading_pauses_at_the_high_water_mark_and_resumes_at_half(monkeypatch):
    later = []
    from twisted.internet import reactor

    monkeypatch.setattr(reactor, "callLater", lambda _delay, check: later.append(check), raising=False)
    sock = protocol()
    for _ in range(RECEIVE_HIGH_WATER - 1):
        sock.onMessage(b"42[]", False)
    assert sock.transport.paused == 0
    sock.onMessage(b"42[]", False)
    assert sock.transport.paused == 1 and sock.reading_paused
    sock.onMessage(b"42[]", False)  # what the last read still held: queued, no second pause
    assert sock.transport.paused == 1 and len(later) == 1  # checked at once: looks again later
    for _ in range(RECEIVE_HIGH_WATER // 2):
        sock.application_queue.get_nowait()
    later.pop()()
    assert sock.transport.resumed == 0 and len(later) == 1  # still more than half
    sock.application_queue.get_nowait()
    later.pop()()
    assert sock.transport.resumed == 1 and later == []
    assert not sock.reading_paused


def test_a_paused_socket_that_went_away_is_not_looked_at_again(monkeypatch):
    later = []
    from twisted.internet import reactor

    monkeypatch.setattr(reactor, "callLater", lambda _delay, check: later.append(check), raising=False)
    sock = protocol()
    for _ in range(RECEIVE_HIGH_WATER):
        sock.onMessage(b"42[]", False)
    assert len(later) == 1
    sock.transport.disconnected = True
    later.pop()()
    assert later == [] and not sock.reading_paused and sock.transport.resumed == 0


# --- the same bound under uvicorn (chatproject.serve_uvicorn) ---------------------------------


class AsyncioTransport:
    """The part of an asyncio transport the WebSocket protocol's reading uses."""

    def __init__(self) -> None:
        self.paused = 0
        self.resumed = 0

    def pause_reading(self) -> None:
        self.paused += 1

    def resume_reading(self) -> None:
        self.resumed += 1

    def is_closing(self) -> bool:
        return False


def uvicorn_protocol() -> Any:
    made = TetherWebSocketsProtocol.__new__(TetherWebSocketsProtocol)
    made.transport = AsyncioTransport()  # type: ignore[assignment]
    made.queue = asyncio.Queue()
    made.read_paused = False
    made.close_sent = False
    made.frames = []
    made.curr_msg_data_type = "text"
    return made


def received(sock: Any, count: int) -> None:
    for _ in range(count):
        sock.handle_text(Frame(Opcode.TEXT, b"42[]"))


async def test_under_uvicorn_reading_pauses_at_the_high_water_mark_and_resumes_at_half():
    """uvicorn's own protocol pauses after every frame; Tether's reads on until 32 wait."""
    sock = uvicorn_protocol()
    received(sock, RECEIVE_HIGH_WATER - 1)
    assert sock.transport.paused == 0 and sock.queue.qsize() == RECEIVE_HIGH_WATER - 1
    received(sock, 1)
    assert sock.transport.paused == 1 and sock.read_paused
    received(sock, 1)  # what the last read still held: queued, no second pause
    assert sock.transport.paused == 1
    for _ in range(RECEIVE_HIGH_WATER - RECEIVE_HIGH_WATER // 2):
        assert (await sock.receive())["text"] == "42[]"
    assert sock.transport.resumed == 0  # still more than half
    await sock.receive()
    assert sock.transport.resumed == 1 and not sock.read_paused
    await sock.receive()
    assert sock.transport.resumed == 1  # reading was not paused: nothing to resume


def test_under_uvicorn_a_text_frame_that_is_not_utf8_is_not_queued():
    sock = uvicorn_protocol()
    closed: list[int] = []
    sock.conn = type("Conn", (), {"send_close": lambda _self, code: closed.append(code)})()
    sock.handle_parser_exception = lambda: None
    sock.logger = logging.getLogger("test")
    sock.handle_text(Frame(Opcode.TEXT, b"\xff\xfe"))
    assert closed == [1007] and sock.queue.empty()
