"""Before a claim's holder shows anything, after a stall: is the claim still this process's?

Writes under a claim are refused by the database once the claim is taken over
(``threads_app.fencing``). Events to sockets are not writes: a process that wakes from a stall
longer than its lease would still stream what its run produces until its next write is
refused. So a holder checks before it emits, but only when this process's lease may have
lapsed since the claim was last known good (``processes.heartbeat.lease_in_doubt``): one read
then, none while the beats are regular.
"""

import threading

from sessions_app.database import database_sync_to_async
from sessions_app.processes import heartbeat
from threads_app import fencing
from threads_app.fencing import Fence


class CheckedClaims:
    """For each claim held here, the heartbeat's ``lapses`` when it was last known current
    (bounded: the newest ``limit`` claims; a forgotten one is checked again)."""

    def __init__(self, limit: int = 4096) -> None:
        self._lock = threading.Lock()
        self._seen: dict[Fence, int] = {}
        self._limit = limit

    def note(self, fence: Fence, lapses: int | None = None) -> None:
        with self._lock:
            self._seen.pop(fence, None)
            self._seen[fence] = heartbeat.lapses if lapses is None else lapses
            while len(self._seen) > self._limit:
                del self._seen[next(iter(self._seen))]

    def seen(self, fence: Fence) -> int:
        with self._lock:
            return self._seen.get(fence, -1)

    def clear(self) -> None:
        with self._lock:
            self._seen.clear()


checked = CheckedClaims()


def note_taken(fence: Fence | None) -> None:
    """A claim was just taken (or read as this process's): it is current now."""
    if fence is not None:
        checked.note(fence)


async def may_show(fence: Fence | None) -> bool:
    """Whether work done under ``fence`` may still be shown (``None``: no claim, always). A
    claim found taken over is marked lost (``fencing.is_lost``) and never shown again."""
    if fence is None:
        return True
    if fencing.is_lost(fence):
        return False
    if not heartbeat.lease_in_doubt(checked.seen(fence)):
        return True
    lapses = heartbeat.lapses
    if await database_sync_to_async(fence.holds)():
        checked.note(fence, lapses)
        return True
    fencing.lost.add(fence)
    return False
