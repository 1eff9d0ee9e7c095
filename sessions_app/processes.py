"""This server process's liveness row and the question "is that process alive?".

Every claim a process holds (a box's runtime, a session's turn, a socket, an accepted send)
names the process by its mailbox address. The process keeps a ``ServerProcess`` row with a
lease (``heartbeat_at``), renewed every ``PROCESS_HEARTBEAT_EVERY`` seconds by a thread of its
own (with its own database connection), so that a busy event loop or a queue on the database
thread never makes a live process look dead. A process whose lease is older than
``PROCESS_DEAD_AFTER`` is dead: whatever it held is free. A graceful shutdown deletes the row
after releasing its claims.

A process that is alive but stalls (a loaded host, a long GIL hold, a VM pause, ``SIGSTOP``)
stops beating too, and taking its work over while it still runs it answers sends twice. Two
rules tell a stall from a death (issue 24):

- *The others vouch for it.* A process's connections are named in PostgreSQL by
  ``DB_APPLICATION_NAME``; a dead process's connections are closed by the kernel at once, a
  stalled one's stay open. Each beat renews the lease of every process whose beats stopped
  for half the dead-after time but whose connections are still open (``vouch_for_stalled``),
  for up to ``PROCESS_STALL_LIMIT`` seconds of stall. A killed process is still judged dead
  ``PROCESS_DEAD_AFTER`` seconds after its last beat.
- *A process that stalled itself judges nobody.* Leases are judged against this process's own
  last beat (``dead_cutoff``), not the wall clock: when a whole machine stalls and wakes, no
  process finds the others' leases lapsed before its own beat has renewed, and vouched, again.

A stall longer than ``PROCESS_STALL_LIMIT`` (``0`` turns vouching off), or a process cut from
the database but still running, is taken over; fencing tokens (``threads_app.fencing``) then
refuse the old owner's writes, and ``ProcessHeartbeat.lease_in_doubt`` tells it, without a
database trip while its beats are regular, when to re-check a claim before showing anything.
"""

import functools
import hashlib
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Mapping
from datetime import datetime, timedelta

from django.conf import settings
from django.db import close_old_connections, connection
from django.db.models import Q, QuerySet
from django.utils import timezone

from sessions_app import metrics
from sessions_app.models import ServerProcess

logger = logging.getLogger(__name__)


def dead_cutoff() -> datetime:
    """Leases older than this have lapsed: ``PROCESS_DEAD_AFTER`` before now, where "now" is
    at most one beat interval after this process's own last beat (so a process that was
    stalled itself does not judge others by the time it lost)."""
    now = timezone.now()
    last_beat = heartbeat.last_beat
    if last_beat is not None:
        now = min(now, last_beat + timedelta(seconds=settings.PROCESS_HEARTBEAT_EVERY))
    return now - timedelta(seconds=settings.PROCESS_DEAD_AFTER)


def live_processes() -> QuerySet[ServerProcess]:
    """Processes whose lease holds (draining ones included: they still finish work)."""
    return ServerProcess.objects.filter(heartbeat_at__gte=dead_cutoff())


def live_addresses() -> QuerySet[ServerProcess, Mapping[str, object]]:
    """The mailbox addresses of live processes, as a subquery for ``__in`` filters."""
    return live_processes().values("address")


def held_by_live_process(field: str) -> Q:
    """``Q`` for rows whose ``field`` names a live process (a claim that still holds)."""
    return Q(**{f"{field}__in": live_addresses()})


def claimable(field: str, me: str, *, reentrant: bool) -> Q:
    """The one lease rule, for every claim (a box's runtime, a session's turn): a row's
    ``field`` may be taken by ``me`` when nobody holds it or its holder is dead, and, for a
    ``reentrant`` lease, when ``me`` holds it already. The caller takes it with one
    conditional UPDATE, so exactly one contender wins."""
    free = Q(**{field: ""}) | ~held_by_live_process(field)
    return free | Q(**{field: me}) if reentrant else free


@functools.cache
def layer_fingerprint() -> str:
    """This process's channel layer, as a short digest of its configuration (hosts included):
    processes with the same one can reach each other's mailboxes."""
    config = json.dumps(settings.CHANNEL_LAYERS.get("default", {}), sort_keys=True, default=str)
    return hashlib.sha256(config.encode()).hexdigest()[:32]


def unreachable_addresses() -> QuerySet[ServerProcess, Mapping[str, object]]:
    """Addresses of processes on another channel layer (another deployment sharing this
    database, or a test's private Redis): their work is not this process's to take over."""
    return ServerProcess.objects.exclude(layer=layer_fingerprint()).values("address")


def is_alive(address: str) -> bool:
    return bool(address) and live_processes().filter(address=address).exists()


def vouch_for_stalled(me: str, now: datetime) -> int:
    """Renew the lease of each other process whose beats stopped half the dead-after time
    ago, less than ``PROCESS_STALL_LIMIT`` ago, and whose database connections are still open
    (PostgreSQL's ``pg_stat_activity``); returns how many. Renewed at half the dead-after time,
    and judged against the last beat of whoever judges (``dead_cutoff``), such a lease never
    lapses while any process beats."""
    if connection.vendor != "postgresql" or settings.PROCESS_STALL_LIMIT <= 0:
        return 0
    table = ServerProcess._meta.db_table  # noqa: SLF001
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET heartbeat_at = %s "  # the table name is the model's
            "WHERE address <> %s AND db_application <> '' AND heartbeat_at < %s AND beat_at >= %s "
            "AND db_application IN (SELECT application_name FROM pg_stat_activity)",
            [
                now,
                me,
                now - timedelta(seconds=settings.PROCESS_DEAD_AFTER / 2),
                now - timedelta(seconds=settings.PROCESS_STALL_LIMIT),
            ],
        )
        vouched = int(cursor.rowcount)
    if vouched:
        metrics.stall_vouches.inc(vouched)
        logger.warning(
            "renewed the lease of %d stalled process(es) whose connections are still open", vouched
        )
    return vouched


class ProcessHeartbeat:
    """Registers this process and keeps its row fresh from a daemon thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.address = ""
        # Set by a graceful shutdown: this process turns new sockets away.
        self.draining = False
        # When the last beat that reached the database began (None before the first).
        self.last_beat: datetime | None = None
        # The same moment on the monotonic clock, and how many times the gap between two
        # beats was long enough for the lease to lapse (others may have taken this
        # process's claims meanwhile).
        self._beat_clock: float | None = None
        self.lapses = 0

    def register(self, address: str) -> None:
        """Write this process's row now (before it claims anything), then ``start``."""
        self.address = address
        self._beat()
        self.start(address)

    def start(self, address: str) -> None:
        """Start beating for ``address`` (idempotent)."""
        with self._lock:
            if self._thread is not None and self._thread.is_alive() and self.address == address:
                return
            self.address = address
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="tether-heartbeat", daemon=True)
            self._thread.start()

    def _beat(self) -> None:
        started = time.monotonic()
        now = timezone.now()
        updated = ServerProcess.objects.filter(address=self.address).update(heartbeat_at=now, beat_at=now)
        if not updated:  # first beat, or the row was removed (a test's flush): register again
            ServerProcess.objects.update_or_create(
                address=self.address,
                defaults={
                    "pid": os.getpid(),
                    "hostname": socket.gethostname(),
                    "app": settings.CHAT_APP,
                    "heartbeat_at": now,
                    "beat_at": now,
                    "draining": False,
                    "layer": layer_fingerprint(),
                    "db_application": settings.DB_APPLICATION_NAME,
                },
            )
        vouch_for_stalled(self.address, now)
        # Only now may this process judge others by ``now``: the stalled ones are renewed.
        self.last_beat = now
        if self._beat_clock is not None and started - self._beat_clock > _doubt_after():
            self.lapses += 1  # counted before the clock moves: the doubt never has a gap
        self._beat_clock = started

    def lease_in_doubt(self, seen: int) -> bool:
        """Whether this process's lease may have lapsed since a holder last checked its claim
        (``seen``: ``lapses`` then): its beats stopped for long enough now, or did since. No
        database trip: while the beats are regular, claims are trusted."""
        clock = self._beat_clock
        return self.lapses != seen or (clock is not None and time.monotonic() - clock > _doubt_after())

    def _run(self) -> None:
        every = settings.PROCESS_HEARTBEAT_EVERY
        while not self._stop.is_set():
            try:
                close_old_connections()
                self._beat()
            except Exception:
                logger.exception("process heartbeat failed")
                connection.close()
            self._stop.wait(every)
        connection.close()

    def stop(self) -> None:
        """Stop beating (the row stays; ``unregister`` deletes it). With no beats of its own,
        this process judges leases by the wall clock again."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
        self.last_beat = None

    def set_draining(self) -> None:
        ServerProcess.objects.filter(address=self.address).update(draining=True)

    def unregister(self) -> None:
        self.stop()
        ServerProcess.objects.filter(address=self.address).delete()


def _doubt_after() -> float:
    """A beat gap after which this process doubts its lease: half the dead-after time, a margin
    for the other processes' clocks and their beat intervals."""
    return float(settings.PROCESS_DEAD_AFTER) / 2


heartbeat = ProcessHeartbeat()
