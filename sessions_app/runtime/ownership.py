"""Which process runs a box's pool.

A box's sessions (and so its engine runs) live in exactly one process at a time, whatever
process the user's socket is on: otherwise two tabs on two processes could start two runs for
one thread. The owner is claimed in the Box row with a conditional UPDATE naming the process's
mailbox channel; one heartbeat task per process keeps all its claims fresh. A claim older than
``STALE_AFTER`` belongs to a dead process and is taken over by the next process that needs the
box; the new owner resumes each thread's engine conversation and re-queues what was accepted
but never transcribed.
"""

import asyncio
import logging
import threading
import uuid
from datetime import timedelta

from channels.db import database_sync_to_async
from django.db.models import Q
from django.utils import timezone

from sessions_app.mailbox import mailbox
from threads_app.models import Box

logger = logging.getLogger(__name__)

HEARTBEAT_EVERY = 2.0
STALE_AFTER = 10.0


@database_sync_to_async
def _claim(box_id: uuid.UUID, me: str) -> str:
    """Take the box if it is free, stale or already ours; return its owner either way."""
    stale = timezone.now() - timedelta(seconds=STALE_AFTER)
    Box.objects.filter(
        Q(runtime_owner="")
        | Q(runtime_owner=me)
        | Q(runtime_heartbeat__lt=stale)
        | Q(runtime_heartbeat=None),
        pk=box_id,
    ).update(runtime_owner=me, runtime_heartbeat=timezone.now())
    return Box.objects.filter(pk=box_id).values_list("runtime_owner", flat=True).get()


@database_sync_to_async
def _beat(me: str) -> int:
    return Box.objects.filter(runtime_owner=me).update(runtime_heartbeat=timezone.now())


@database_sync_to_async
def release_all(me: str) -> None:
    Box.objects.filter(runtime_owner=me).update(runtime_owner="", runtime_heartbeat=None)


class Heartbeat:
    """One task per process that keeps this process's box claims fresh."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._task: asyncio.Task | None = None

    def ensure_running(self, me: str) -> None:
        with self._lock:
            if self._task is None or self._task.done():
                self._task = asyncio.get_running_loop().create_task(self._run(me))

    async def _run(self, me: str) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_EVERY)
            try:
                await _beat(me)
            except Exception:
                logger.exception("box heartbeat failed")


heartbeat = Heartbeat()


class KnownOwners:
    """What this process last learned about box owners, trusted for ``HEARTBEAT_EVERY``
    seconds: a send then needs no claim round trip. Guarded by a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owners: dict[uuid.UUID, tuple[str, float]] = {}

    def get(self, box_id: uuid.UUID, now: float) -> str | None:
        with self._lock:
            known = self._owners.get(box_id)
        return known[0] if known and now - known[1] < HEARTBEAT_EVERY else None

    def put(self, box_id: uuid.UUID, owner: str, now: float) -> None:
        with self._lock:
            self._owners[box_id] = (owner, now)

    def forget(self, box_id: uuid.UUID) -> None:
        with self._lock:
            self._owners.pop(box_id, None)


known_owners = KnownOwners()


async def owner_of(box_id: uuid.UUID, *, fresh: bool = False) -> tuple[str, bool]:
    """``(owner channel, is_me)`` for the box, claiming it when nobody live holds it.
    ``fresh`` skips what this process remembers (after the owner failed to answer)."""
    me = await mailbox.channel()
    now = asyncio.get_running_loop().time()
    owner = None if fresh else known_owners.get(box_id, now)
    if owner is None:
        owner = await _claim(box_id, me)
        known_owners.put(box_id, owner, now)
    if owner == me:
        heartbeat.ensure_running(me)
    return owner, owner == me
