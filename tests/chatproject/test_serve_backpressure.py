"""A socket whose frames pile up for the application is not read until the application
caught up (``chatproject.serve.TetherWebSocketProtocol``), so a flood's frames wait in its
client's TCP buffers, not in the server's memory. Against daphne's protocol object with a
stand-in transport; the flood tests (``tests/sessions_app/test_input_floods.py``) measure the
memory against a real daphne."""

import asyncio

from chatproject.serve import RECEIVE_HIGH_WATER, TetherWebSocketProtocol


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
