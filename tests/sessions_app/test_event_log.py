"""The window of a session's recent events (``event_log``) and what a client may ask of it
(``replay.requested_offset``), on the backend the suite runs with (Redis when ``REDIS_URL``
is set, memory otherwise) and on the memory backend."""

import asyncio
import uuid

import pytest

from sessions_app.event_frames import encode_event
from sessions_app.event_log import EventLog
from sessions_app.replay import RecoveryRefused, requested_offset


@pytest.fixture
def log(settings) -> EventLog:
    settings.EVENT_REPLAY_MAX_EVENTS = 5
    settings.EVENT_REPLAY_MAX_AGE = 60
    return EventLog()


async def append(log: EventLog, session: uuid.UUID, count: int) -> list[int | None]:
    return [
        await log.append(session, encode_event("stream_token", [{"token": f"t{i}"}])) for i in range(count)
    ]


@pytest.mark.parametrize("backend", ["configured", "memory"])
async def test_offsets_count_per_session_and_the_window_keeps_the_newest(log, settings, backend):
    if backend == "memory":
        settings.REDIS_URL = ""
    one, two = uuid.uuid4(), uuid.uuid4()
    assert await append(log, one, 3) == [1, 2, 3]
    assert await append(log, two, 1) == [1]  # another session counts on its own
    assert await append(log, one, 4) == [4, 5, 6, 7]

    covered = await log.since(one, 3)  # 4..7 are in the window of the last 5 (3..7)
    assert covered.complete and [e.offset for e in covered.events] == [4, 5, 6, 7]
    assert covered.events[0].event == "stream_token" and covered.events[0].args == [{"token": "t0"}]
    assert (await log.since(one, 7)).complete and (await log.since(one, 7)).events == []
    gone = await log.since(one, 1)  # 2 fell out of the window
    assert not gone.complete and gone.latest == 7
    future = await log.since(one, 99)  # an offset this log never handed out
    assert not future.complete and future.events == []


async def test_events_older_than_the_window_age_are_not_replayed(log, settings):
    settings.REDIS_URL = ""
    settings.EVENT_REPLAY_MAX_AGE = 0.2
    session = uuid.uuid4()
    await append(log, session, 2)
    await asyncio.sleep(0.3)
    assert await append(log, session, 1) == [3]
    missed = await log.since(session, 0)
    assert [e.offset for e in missed.events] == [3] and not missed.complete


async def test_replay_off_hands_out_no_offsets(log, settings):
    settings.EVENT_REPLAY_MAX_EVENTS = 0
    assert await append(log, uuid.uuid4(), 2) == [None, None]


def test_what_a_client_may_ask_for():
    assert requested_offset({"sessionId": "x"}) == (False, None, None)
    assert requested_offset({"offsets": True}) == (True, None, None)
    assert requested_offset({"offsets": True, "offset": "12", "pid": "p"}) == (True, 12, "p")
    assert requested_offset({"offset": 3}) == (True, 3, None)
    for bad in ({"offset": "-1"}, {"offset": "1e3"}, {"offset": True}, {"offset": [1]}, {"pid": 5}):
        with pytest.raises(RecoveryRefused):
            requested_offset(bad)
