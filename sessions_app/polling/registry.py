"""The polling sessions this process owns, by sid.

One per process: sessions are added by a handshake and removed when they end, from the
process's event loop(s); a lock guards the table, as for ``heartbeats``, since tests may run
more than one loop. ``reset()`` is for tests.
"""

import threading

from sessions_app.polling.session import PollingSession


class PollingSessions:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: dict[str, PollingSession] = {}

    def add(self, session: PollingSession) -> None:
        with self._lock:
            self._sessions[session.sid] = session
        session.on_end = self.remove

    def get(self, sid: str) -> PollingSession | None:
        with self._lock:
            return self._sessions.get(sid)

    def remove(self, session: PollingSession) -> None:
        with self._lock:
            if self._sessions.get(session.sid) is session:
                del self._sessions[session.sid]

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    def reset(self) -> None:
        with self._lock:
            self._sessions.clear()


polling_sessions = PollingSessions()
