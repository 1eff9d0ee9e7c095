"""This server process's liveness row and the question "is that process alive?".

Every claim a process holds (a box's runtime, a session's turn, a socket, an accepted send)
names the process by its mailbox address. The process keeps a ``ServerProcess`` row with a
heartbeat, written every ``PROCESS_HEARTBEAT_EVERY`` seconds by a thread of its own (with its
own database connection), so that a busy event loop or a queue on the database thread never
makes a live process look dead. A process whose heartbeat is older than
``PROCESS_DEAD_AFTER`` is dead: whatever it held is free. A graceful shutdown deletes the row
after releasing its claims.
"""

import functools
import hashlib
import json
import logging
import os
import socket
import threading
from collections.abc import Mapping
from datetime import timedelta

from django.conf import settings
from django.db import close_old_connections, connection
from django.db.models import Q, QuerySet
from django.utils import timezone

from sessions_app.models import ServerProcess

logger = logging.getLogger(__name__)


def live_processes() -> QuerySet[ServerProcess]:
    """Processes whose heartbeat is fresh (draining ones included: they still finish work)."""
    cutoff = timezone.now() - timedelta(seconds=settings.PROCESS_DEAD_AFTER)
    return ServerProcess.objects.filter(heartbeat_at__gte=cutoff)


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


class ProcessHeartbeat:
    """Registers this process and keeps its row fresh from a daemon thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.address = ""
        # Set by a graceful shutdown: this process turns new sockets away.
        self.draining = False

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
        now = timezone.now()
        updated = ServerProcess.objects.filter(address=self.address).update(heartbeat_at=now)
        if not updated:  # first beat, or the row was removed (a test's flush): register again
            ServerProcess.objects.update_or_create(
                address=self.address,
                defaults={
                    "pid": os.getpid(),
                    "hostname": socket.gethostname(),
                    "app": settings.CHAT_APP,
                    "heartbeat_at": now,
                    "draining": False,
                    "layer": layer_fingerprint(),
                },
            )

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
        """Stop beating (the row stays; ``unregister`` deletes it)."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    def set_draining(self) -> None:
        ServerProcess.objects.filter(address=self.address).update(draining=True)

    def unregister(self) -> None:
        self.stop()
        ServerProcess.objects.filter(address=self.address).delete()


heartbeat = ProcessHeartbeat()
