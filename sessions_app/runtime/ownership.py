"""Which process runs a box's pool.

A box's sessions (and so its engine runs) live in exactly one process at a time, whatever
process the user's socket is on: otherwise two tabs on two processes could start two runs for
one thread. The owner is claimed in the Box row with a conditional UPDATE naming the process's
mailbox address. The claim holds as long as that process is alive (``sessions_app.processes``):
a box whose owner stopped beating is taken over by the next process that needs it (or by the
recovery loop, which looks for such boxes with sends waiting); the new owner resumes each
thread's engine conversation, re-queues what was accepted but never transcribed, and closes
turns the dead owner left unfinished with a visible error.
"""

import asyncio
import threading
import uuid

from sessions_app.database import database_sync_to_async
from sessions_app.mailbox import mailbox
from sessions_app.processes import claimable
from threads_app import services

# How long this process trusts what it last learned about a box's owner.
KNOWN_OWNER_TTL = 2.0


def claim_box(box_id: uuid.UUID, me: str) -> str:
    """Take the box if it is free, its owner is dead, or it is already ours; return its owner."""
    return services.claim_box(box_id, me, claimable=claimable("runtime_owner", me, reentrant=True))


def release_all(me: str) -> int:
    """Give up every box this process owns (a graceful shutdown). A box with sends still open
    keeps this process's address: once its liveness row is gone that claim is dead, which is
    what tells the recovery loop of a live process to take the box and its sends over."""
    return services.release_boxes(me)


class KnownOwners:
    """What this process last learned about box owners, trusted for ``KNOWN_OWNER_TTL``
    seconds: a send then needs no claim round trip. Guarded by a lock; bounded by the boxes
    this process has served (stale entries are dropped when read)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owners: dict[uuid.UUID, tuple[str, float]] = {}

    def get(self, box_id: uuid.UUID, now: float) -> str | None:
        with self._lock:
            known = self._owners.get(box_id)
            if known and now - known[1] >= KNOWN_OWNER_TTL:
                del self._owners[box_id]
                known = None
        return known[0] if known else None

    def put(self, box_id: uuid.UUID, owner: str, now: float) -> None:
        with self._lock:
            self._owners[box_id] = (owner, now)

    def forget(self, box_id: uuid.UUID) -> None:
        with self._lock:
            self._owners.pop(box_id, None)

    def clear(self) -> None:
        with self._lock:
            self._owners.clear()


known_owners = KnownOwners()


async def owner_of(box_id: uuid.UUID, *, fresh: bool = False) -> tuple[str, bool]:
    """``(owner address, is_me)`` for the box, claiming it when no live process holds it.
    ``fresh`` skips what this process remembers (after the owner failed to answer)."""
    me = await mailbox.channel()
    now = asyncio.get_running_loop().time()
    owner = None if fresh else known_owners.get(box_id, now)
    if owner is None:
        owner = await database_sync_to_async(claim_box)(box_id, me)
        known_owners.put(box_id, owner, now)
    return owner, owner == me
