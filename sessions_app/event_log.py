"""The recent events of each session, numbered, so that a socket that reconnects gets what it
missed (DESIGN.md section 10, "Event offsets").

Every event emitted to a session (``emitter.emit_to_session``) is appended here first and gets
the session's next offset: 1, 2, 3, ... per session, from one counter that every process
shares, so offsets survive a move of the session between processes. The log keeps a bounded
window: the last ``EVENT_REPLAY_MAX_EVENTS`` events, none older than ``EVENT_REPLAY_MAX_AGE``
seconds. ``since(offset)`` answers what came after an offset and whether the window still
covers the whole gap (when it does not, the client re-reads the history).

With ``REDIS_URL`` the window lives in the channel layer's Redis (one script per append: the
counter, the entry, the trim and the expiry in one round trip); without it (the embedded
default, one process) in this process's memory.
"""

import logging
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any

import redis
from django.conf import settings

from sessions_app.event_frames import EncodedEvent
from sessions_app.wire_json import loads
from threads_app import redis_clients
from threads_app.redis_clients import RedisClients

logger = logging.getLogger(__name__)

# KEYS[1] the counter, KEYS[2] the list of entries; ARGV[1] the event (JSON), ARGV[2] the
# window's size, ARGV[3] its age in ms, ARGV[4] how long the counter outlives its last event
# (ms). An entry is "<offset> <ms> <event JSON>".
APPEND = """
local offset = redis.call('INCR', KEYS[1])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
redis.call('RPUSH', KEYS[2], offset .. ' ' .. now .. ' ' .. ARGV[1])
redis.call('LTRIM', KEYS[2], -tonumber(ARGV[2]), -1)
redis.call('PEXPIRE', KEYS[2], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return offset
"""

# KEYS[1] the counter, KEYS[2] the entries: the current offset, Redis's clock (ms) and the
# entries, read together so that they agree.
READ = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
return {redis.call('GET', KEYS[1]) or '0', now, redis.call('LRANGE', KEYS[2], 0, -1)}
"""


@dataclass(frozen=True)
class LoggedEvent:
    offset: int
    event: str
    args: list[Any]


@dataclass(frozen=True)
class Missed:
    """What a session emitted after an offset, in order; ``complete`` is False when the window
    no longer holds all of it (or the offset is not one this log handed out)."""

    events: list[LoggedEvent]
    complete: bool
    latest: int  # the session's newest offset when read
    held: int = 0  # how many events the session's window held when read


def _missed(after: int, latest: int, entries: list[LoggedEvent]) -> Missed:
    wanted = [e for e in entries if e.offset > after]
    if after > latest:
        return Missed([], False, latest, len(entries))
    complete = after == latest or (bool(wanted) and wanted[0].offset == after + 1)
    return Missed(wanted, complete, latest, len(entries))


def _keys(session_id: uuid.UUID) -> list[str]:
    """The session's counter and its list of entries."""
    return [redis_clients.key("events", session_id.hex, part) for part in ("offset", "log")]


async def _redis_append(
    clients: RedisClients, session_id: uuid.UUID, encoded: str, size: int, age_ms: int
) -> int:
    # The counter outlives the window (and the session's own timeout), so offsets never
    # restart while a client may still hold one.
    keep_counter_ms = max(age_ms, int(settings.SESSION_TIMEOUT * 1000)) * 2
    client = clients.async_client()
    return int(await client.eval(APPEND, 2, *_keys(session_id), encoded, size, age_ms, keep_counter_ms))


async def _redis_read(
    clients: RedisClients, session_id: uuid.UUID, age_ms: int
) -> tuple[int, list[LoggedEvent]]:
    latest, now, raw = await clients.async_client().eval(READ, 2, *_keys(session_id))
    entries = []
    for item in raw:
        offset, at, encoded = item.decode().split(" ", 2)
        if int(now) - int(at) > age_ms:
            continue
        event, args = loads(encoded)
        entries.append(LoggedEvent(int(offset), event, args))
    return int(latest), entries


class _MemoryLog:
    """One process's windows (the embedded default). Guarded by a lock: emits come from the
    event loop, the expiry sweep too, but tests call in from other threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._logs: dict[uuid.UUID, tuple[int, deque[tuple[float, str]]]] = {}
        self._appends = 0

    def append(self, session_id: uuid.UUID, encoded: str, size: int, age: float) -> int:
        now = time.monotonic()
        with self._lock:
            latest, entries = self._logs.get(session_id, (0, deque()))
            latest += 1
            entries.append((now, f"{latest} {encoded}"))
            while len(entries) > size or (entries and now - entries[0][0] > age):
                entries.popleft()
            self._logs[session_id] = (latest, entries)
            self._appends += 1
            if self._appends % 1000 == 0:
                self._sweep(now, age)
            return latest

    def _sweep(self, now: float, age: float) -> None:
        """Forget sessions that emitted nothing for a long while (twice the session timeout)."""
        horizon = max(age, float(settings.SESSION_TIMEOUT)) * 2
        for session_id, (_latest, entries) in list(self._logs.items()):
            if not entries or now - entries[-1][0] > horizon:
                del self._logs[session_id]

    def read(self, session_id: uuid.UUID, age: float) -> tuple[int, list[LoggedEvent]]:
        now = time.monotonic()
        with self._lock:
            latest, entries = self._logs.get(session_id, (0, deque()))
            raw = [item for at, item in entries if now - at <= age]
        logged = []
        for item in raw:
            offset, encoded = item.split(" ", 1)
            event, args = loads(encoded)
            logged.append(LoggedEvent(int(offset), event, args))
        return latest, logged

    def clear(self) -> None:
        with self._lock:
            self._logs.clear()


class EventLog:
    """The window of every session's recent events (Redis or memory, chosen by settings)."""

    def __init__(self) -> None:
        self.memory = _MemoryLog()

    @staticmethod
    def _window() -> tuple[int, float]:
        return int(settings.EVENT_REPLAY_MAX_EVENTS), float(settings.EVENT_REPLAY_MAX_AGE)

    async def append(self, session_id: uuid.UUID, event: EncodedEvent) -> int | None:
        """Log the event and return its offset; None when replay is off or the log is
        unavailable (Redis down: the event is still delivered live, just not replayable)."""
        size, age = self._window()
        if size <= 0:
            return None
        encoded = event.log_entry()  # cut from its frame: not encoded again
        clients = redis_clients.configured()
        if clients is None:
            return self.memory.append(session_id, encoded, size, age)
        try:
            return await _redis_append(clients, session_id, encoded, size, int(age * 1000))
        except (redis.RedisError, OSError) as exc:
            logger.warning("event %s of session %s not logged for replay: %r", event.event, session_id, exc)
            return None

    async def since(self, session_id: uuid.UUID, offset: int) -> Missed:
        """What the session emitted after ``offset`` (see ``Missed``)."""
        _size, age = self._window()
        clients = redis_clients.configured()
        if clients is None:
            latest, entries = self.memory.read(session_id, age)
        else:
            try:
                latest, entries = await _redis_read(clients, session_id, int(age * 1000))
            except (redis.RedisError, OSError) as exc:
                logger.warning("replay for session %s unavailable: %r", session_id, exc)
                return Missed([], False, offset)
        return _missed(offset, latest, entries)


event_log = EventLog()
