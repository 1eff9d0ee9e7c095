"""Which process runs what: a thread's interactive session, a box's integration sessions.

An interactive thread's ``ChatSession`` (its engine run and its queue) lives in exactly one
process at a time, whatever process each tab's socket is on: otherwise two tabs on two
processes could start two runs for one thread. The first process that needs the thread (the
one whose socket sent to it, or opened it) claims it, so a thread's turns run where its
sockets are, and one user's threads spread over processes run on all of them. A box's
integration sessions share one owner per box (one integration thread is active per box).

Both claims are a conditional UPDATE naming the process's mailbox address in the row's
``runtime_owner`` (``Thread`` or ``Box``). A claim holds as long as that process is alive
(``sessions_app.processes``): a thread or box whose owner stopped beating is taken over by the
next process that needs it (or, for threads with sends waiting, by the recovery loop); the
new owner resumes the engine conversation, re-queues what was accepted but never transcribed,
and closes turns the dead owner left unfinished with a visible error.
"""

import asyncio
import threading
import uuid
from collections.abc import Callable

from sessions_app.database import database_sync_to_async
from sessions_app.mailbox import mailbox
from sessions_app.processes import claimable
from threads_app import services

# How long this process trusts what it last learned about an owner.
KNOWN_OWNER_TTL = 2.0

# What is owned: ("box", box id) or ("thread", thread id).
Owned = tuple[str, uuid.UUID]


def claim_box(box_id: uuid.UUID, me: str) -> str:
    """Take the box if it is free, its owner is dead, or it is already ours; return its owner."""
    return services.claim_box(box_id, me, claimable=claimable("runtime_owner", me, reentrant=True))


def claim_thread(thread_id: uuid.UUID, me: str) -> str:
    """Take the thread's interactive runtime on the same terms; return its owner."""
    return services.claim_thread(thread_id, me, claimable=claimable("runtime_owner", me, reentrant=False))


def release_all(me: str) -> int:
    """Give up every box and thread this process runs (a graceful shutdown). A thread with
    sends still open keeps this process's address: once its liveness row is gone that claim is
    dead, which is what tells the recovery loop of a live process to take the thread over."""
    return services.release_boxes(me) + services.release_threads(me)


class KnownOwners:
    """What this process last learned about owners, trusted for ``KNOWN_OWNER_TTL`` seconds: a
    send then needs no claim round trip. Guarded by a lock; bounded by the boxes and threads
    this process has served (stale entries are dropped when read)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owners: dict[Owned, tuple[str, float]] = {}

    def get(self, owned: Owned, now: float) -> str | None:
        with self._lock:
            known = self._owners.get(owned)
            if known and now - known[1] >= KNOWN_OWNER_TTL:
                del self._owners[owned]
                known = None
        return known[0] if known else None

    def put(self, owned: Owned, owner: str, now: float) -> None:
        with self._lock:
            self._owners[owned] = (owner, now)

    def forget(self, owned: Owned) -> None:
        with self._lock:
            self._owners.pop(owned, None)

    def clear(self) -> None:
        with self._lock:
            self._owners.clear()


known_owners = KnownOwners()

CLAIMS: dict[str, Callable[[uuid.UUID, str], str]] = {"box": claim_box, "thread": claim_thread}


async def owner_of(owned: Owned, *, fresh: bool = False) -> tuple[str, bool]:
    """``(owner address, is_me)`` for a box or thread, claiming it when no live process holds
    it. ``fresh`` skips what this process remembers (after the owner failed to answer)."""
    me = await mailbox.channel()
    now = asyncio.get_running_loop().time()
    owner = None if fresh else known_owners.get(owned, now)
    if owner is None:
        kind, pk = owned
        owner = await database_sync_to_async(CLAIMS[kind])(pk, me)
        known_owners.put(owned, owner, now)
    return owner, owner == me
