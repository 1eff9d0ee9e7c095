"""What a server process starts as soon as it serves, before any socket or request needs it.

The mailbox (the process's address on the channel layer, its liveness row and heartbeat) and
the process-wide loops that start with it (recovery, run expiry, session expiry:
``sessions_app.state``) otherwise start on first use; the task workers
(``sessions_app.task_worker``) start only here, in server processes. A process that has served nothing yet
(a replacement started after a crash, a process the balancer sends no socket) would then
recover nothing: the sends a dead process left would wait for some other process to be used.
Under daphne they start once the reactor runs; under uvicorn at the lifespan startup.
"""

import asyncio
import contextvars
import logging
import sys
from typing import Any

from chatproject import heap, log_context
from sessions_app import metrics_files
from sessions_app.mailbox import mailbox
from sessions_app.task_worker import task_workers

logger = logging.getLogger(__name__)


async def start_process() -> None:
    """Start the mailbox (and the loops that start with it); a failure is logged, and the
    next use of the mailbox tries again. Then freeze the loaded heap (``chatproject.heap``)."""
    await asyncio.to_thread(metrics_files.forget_dead_processes)
    try:
        address = await mailbox.channel()
    except Exception:
        logger.exception("the mailbox did not start; it starts on first use instead")
    else:
        log_context.name_process(address)
        task_workers.start(address)
    heap.freeze_startup_heap()  # what is loaded by now lives as long as the process


def start_soon(loop: asyncio.AbstractEventLoop) -> None:
    """Schedule ``start_process`` on ``loop``, in a fresh context (its tasks outlive any
    request, as in ``sessions_app.server_loop``)."""
    loop.create_task(start_process(), context=contextvars.Context())


def install_on_daphne() -> None:
    """Start the process once daphne's reactor runs (daphne sends no lifespan scope)."""
    if "twisted.internet.reactor" not in sys.modules:
        return
    from twisted.internet import reactor

    def started(*_args: Any) -> None:
        start_soon(asyncio.get_event_loop())

    reactor.callWhenRunning(started)
