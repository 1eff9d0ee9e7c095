"""A graceful stop on SIGTERM: finish or hand over the work, release every claim, then exit.

daphne's own SIGTERM handling stops the reactor at once and cancels every connection's
consumer, so disconnect handlers never complete and claims stay behind until they go stale;
uvicorn's closes every socket, then stops. Under either server Tether handles SIGTERM itself
(daphne: a handler installed once the reactor runs; uvicorn: ``chatproject.serve_uvicorn``);
it:

1. marks the process draining (no new box or send is given to it) and pauses recovery;
2. stops starting turns: each ChatSession drains (its queue stays pending in the database),
   hooks-API sends still waiting for their turn are released for another process;
3. runs every socket's disconnect (the user session is saved, the session marked
   disconnected) and closes the sockets, so clients reconnect elsewhere at once (new
   sockets are refused from now on); what the running turns still emit reaches them there
   through the channel layer;
4. waits up to ``SHUTDOWN_GRACE`` seconds for running turns to finish; a turn still running
   then ends with an error step (what was streamed of it is kept);
5. releases the boxes it owns and the sends it holds, deletes its liveness row and stops
   the server (daphne's reactor, or uvicorn's main loop).

A second SIGTERM stops at once.
"""

import asyncio
import logging
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings

from sessions_app import metrics_files
from sessions_app.dashboard_samples import sample_publisher
from sessions_app.database import database_sync_to_async
from sessions_app.emitter import local_sockets
from sessions_app.live import live_sessions
from sessions_app.mailbox import mailbox
from sessions_app.processes import heartbeat
from sessions_app.recovery import recovery_loop
from sessions_app.runtime.ownership import known_owners, release_all
from sessions_app.runtime.pool import pools
from sessions_app.startup import start_soon
from sessions_app.task_worker import task_workers
from threads_app.services import release_sends_held_by

logger = logging.getLogger(__name__)

POLL = 0.05


def is_draining() -> bool:
    """True once a graceful shutdown began: new sockets are refused and ``/readyz`` answers
    503, so a balancer sends nothing new here while the process finishes its work."""
    return heartbeat.draining


def _busy() -> bool:
    for pool in pools.all():
        if any(s.is_busy() for s in pool.chat_sessions.values()):
            return True
        if any(s.is_busy() for s in pool.thread_sessions.values()):
            return True
    return any(live.current_task is not None for live in live_sessions.all())


async def shut_down(grace: float) -> None:
    """Drain this process (see the module docstring); safe to call once."""
    me = mailbox.address
    heartbeat.draining = True  # new sockets are turned away from now on
    recovery_loop.paused = True
    if me:
        await database_sync_to_async(heartbeat.set_draining)()
    chat_sessions = [s for pool in pools.all() for s in pool.chat_sessions.values()]
    for session in chat_sessions:
        await session.drain()
    for live in live_sessions.all():
        live.drop_waiting()
    if me:
        await database_sync_to_async(release_sends_held_by)(me)

    # Sockets first: their clients reconnect to another process at once and keep receiving
    # what the turns still running here emit, through the channel layer.
    logger.info("shutdown: closing %d sockets", len(local_sockets))
    for socket in local_sockets.all():
        try:
            await socket.go_away()
        except Exception:
            logger.exception("closing a socket at shutdown failed")

    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace
    while _busy() and loop.time() < deadline:  # noqa: ASYNC110 - turns of both kinds, no one event
        await asyncio.sleep(POLL)
    if _busy():
        logger.warning("shutdown grace of %ss ran out; ending the turns still running", grace)
    else:
        logger.info("shutdown: running turns finished")
    for session in chat_sessions:
        await session.finish_draining(in_time=not session.is_busy())
    for live in live_sessions.all():
        if live.current_task is not None:
            live.shutting_down = True
            live.cancel_current()
            await live.wait_current()
    for pool in pools.all():
        for thread_session in list(pool.thread_sessions.values()):
            await thread_session.stop()

    # The task workers finish the attempt they run; queued ones wait for another process.
    await asyncio.to_thread(task_workers.stop)
    logger.info("shutdown: releasing claims")
    if me:
        await database_sync_to_async(release_all)(me)
        await database_sync_to_async(release_sends_held_by)(me)
        await database_sync_to_async(heartbeat.unregister)()
        await database_sync_to_async(sample_publisher.unregister)()
    known_owners.clear()
    metrics_files.process_exited()
    logger.info("shutdown complete")


class GracefulShutdown:
    """The SIGTERM handler, under either server: the first SIGTERM drains, then stops the
    server; a second one stops it at once. daphne's is installed here
    (:meth:`install_on_daphne`); uvicorn's server calls :meth:`begin` itself
    (``chatproject.serve_uvicorn``), and :func:`lifespan` drains a plain uvicorn."""

    def __init__(self) -> None:
        self.task: asyncio.Task[Any] | None = None

    def install_on_daphne(self) -> None:
        """Take SIGTERM over from Twisted once the reactor runs (Twisted installs its own
        handlers while starting; ``callWhenRunning`` runs after that)."""
        if "twisted.internet.reactor" not in sys.modules:
            return
        from twisted.internet import reactor

        reactor.callWhenRunning(self._install, reactor)

    def _install(self, reactor: Any) -> None:
        loop = asyncio.get_event_loop()

        def on_sigterm(_signum: int, _frame: Any) -> None:
            loop.call_soon_threadsafe(self.begin, reactor.stop)

        signal.signal(signal.SIGTERM, on_sigterm)

    def begin(self, stop: Callable[[], None], stop_now: Callable[[], None] | None = None) -> None:
        """On the event loop, for a SIGTERM: the first drains this process, then calls
        ``stop``; a later one calls ``stop_now`` (by default ``stop``) at once."""
        if self.task is not None:
            logger.warning("second SIGTERM: stopping now")
            (stop_now or stop)()
            return
        logger.info("SIGTERM: draining (grace %ss)", settings.SHUTDOWN_GRACE)

        async def drain_then_stop() -> None:
            try:
                await shut_down(settings.SHUTDOWN_GRACE)
            except Exception:
                logger.exception("graceful shutdown failed")
            finally:
                stop()

        self.task = asyncio.get_running_loop().create_task(drain_then_stop())

    async def drained(self) -> None:
        """Drain unless a SIGTERM did already; return once the drain is over."""
        if self.task is None:
            logger.info("lifespan shutdown: draining (grace %ss)", settings.SHUTDOWN_GRACE)
            self.task = asyncio.get_running_loop().create_task(shut_down(settings.SHUTDOWN_GRACE))
        try:
            await asyncio.shield(self.task)
        except Exception:
            logger.exception("graceful shutdown failed")


graceful_shutdown = GracefulShutdown()


async def lifespan(
    scope: dict[str, Any], receive: Callable[[], Awaitable[Any]], send: Callable[[Any], Awaitable[None]]
) -> None:
    """The ASGI lifespan scope (uvicorn sends it; daphne does not): the startup starts the
    process's mailbox and loops (``sessions_app.startup``), and the shutdown drains it, so that ``uvicorn chatproject.asgi:application`` without
    Tether's wrapper still releases its claims (after uvicorn closed the sockets itself)."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            start_soon(asyncio.get_running_loop())
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await graceful_shutdown.drained()
            await send({"type": "lifespan.shutdown.complete"})
            return
