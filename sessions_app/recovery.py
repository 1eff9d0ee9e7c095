"""The recovery loop: no accepted send is left without an owner.

A send is committed before anything else happens to it, so whatever fails next (the channel
layer while handing it over, the process holding it, the process running its turn) leaves a
row in the database that says so. Every ``RECOVERY_EVERY`` seconds each process looks for
such rows among the work it can take:

- engine-runtime apps: chat sends of threads this process runs, or whose owner is dead or
  that nobody claimed (the thread is then claimed), that are pending and not held by the
  thread's ChatSession, or whose turn began and never ended; the thread's session re-queues the first and closes the second with
  a visible error (``chats.recover_thread``);
- engine-runtime apps: integration sends of boxes this process runs, or whose owner is dead
  or that nobody claimed (the box is then claimed): pending ones are answered, turns that
  began and never ended are closed with a visible error, and either reaches the box's
  webhook (``integration_turns.recover``);
- hooks-API apps: sends of the sessions whose socket this process holds, whose holder died
  (``hook_sends.recover``).

Each pass first gives the sockets this process holds their session records back if another
process detached them while this one stalled (``stall_reattach``). It also closes the asks whose asking process died (``asks.close_orphaned``) and runs
again the webhook attempts (``webhook_tasks``) whose process died while
running them. It starts with the process's mailbox and does nothing while the process drains
(shutdown).
"""

import asyncio
import logging
import uuid
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from sessions_app import asks, hook_sends, metrics, webhook_tasks
from sessions_app.chat.hooks import load_app
from sessions_app.database import database_sync_to_async
from sessions_app.emitter import local_sockets
from sessions_app.live import live_sessions
from sessions_app.mailbox import mailbox
from sessions_app.processes import live_addresses, live_processes, unreachable_addresses
from sessions_app.runtime import chats, integration_turns
from sessions_app.runtime.ownership import owner_of
from sessions_app.stall_reattach import stall_reattachment
from sessions_app.task_worker import worker_id
from threads_app import selectors
from threads_app.models import AcceptedMessage

logger = logging.getLogger(__name__)

# A pending send younger than this is probably being handed over right now.
HAND_OVER_GRACE = timedelta(seconds=1)


def orphaned_chat_threads(me: str) -> list[tuple[uuid.UUID, uuid.UUID, str]]:
    """``(box, thread, author)`` of chat sends this process should look after: pending for a
    moment, or transcribed with no outcome, in threads run by this process or by a process
    that is gone (and was on this process's channel layer)."""
    return selectors.chat_threads_to_recover(
        me,
        live_owners=live_addresses(),
        unreachable_owners=unreachable_addresses(),
        settled_before=timezone.now() - HAND_OVER_GRACE,
    )


def orphaned_integration_sends(me: str) -> list[AcceptedMessage]:
    """Integration sends this process should look after (``integration_turns.recover``): of
    boxes it runs, nobody runs, or a process that is gone runs."""
    return selectors.integration_sends_to_recover(
        me,
        live_owners=live_addresses(),
        unreachable_owners=unreachable_addresses(),
        settled_before=timezone.now() - HAND_OVER_GRACE,
    )


def requeue_abandoned_tasks() -> int:
    """Webhook attempts whose process died while running them run again."""
    live = {worker_id(address) for address in live_processes().values_list("address", flat=True)}
    return webhook_tasks.requeue_abandoned(live)


async def recover_once() -> int:
    """One pass; returns how many threads or sends it looked after."""
    me = await mailbox.channel()
    await stall_reattachment.after_stall()
    await database_sync_to_async(requeue_abandoned_tasks)()
    await asks.close_orphaned()
    if load_app().engine_runtime:
        done = 0
        for box_id, thread_id, author in await database_sync_to_async(orphaned_chat_threads)(me):
            _owner, mine = await owner_of(("thread", thread_id), fresh=True)
            if mine:
                await chats.recover_thread(box_id, thread_id, author)
                metrics.recovered.labels("chat_thread").inc()
                done += 1
        by_box: dict[uuid.UUID, list[AcceptedMessage]] = {}
        for send in await database_sync_to_async(orphaned_integration_sends)(me):
            by_box.setdefault(send.box_id, []).append(send)
        for box_id, sends in by_box.items():
            _owner, mine = await owner_of(("box", box_id), fresh=True)
            if mine:
                looked_after = await integration_turns.recover(box_id, sends)
                metrics.recovered.labels("integration_send").inc(looked_after)
                done += looked_after
        return done
    here = [live for live in (live_sessions.get(i) for i in local_sockets.session_ids()) if live is not None]
    return await hook_sends.recover(here)


class RecoveryLoop:
    """One task per process (started with the mailbox)."""

    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None
        self.paused = False  # set while the process drains

    def start(self, _address: str) -> None:
        if settings.RECOVERY_EVERY <= 0:
            return  # switched off (the test runner's own process: the servers it starts recover)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(settings.RECOVERY_EVERY)
            if self.paused:
                continue
            try:
                await recover_once()
            except Exception:
                logger.exception("recovery pass failed")

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None


recovery_loop = RecoveryLoop()
