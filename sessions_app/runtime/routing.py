"""Running a request where its session lives: in this process, or in its owner's.

A thread's interactive session and a box's integration sessions each live in one process
(``ownership``). A caller in any process names what the request is for, the request (a dict
with a ``type``) and the function that serves it; ``at_thread_owner`` / ``at_box_owner`` run
that function here when this process is the owner, or send the request to the owner's
mailbox, where ``runtime.owner_handlers`` maps the type to the same function, and return the
answer. An owner that does not answer (it died, or the channel layer is down) raises
``MailboxError``; before giving up, the thread or box is claimed afresh, which succeeds when
its owner is dead, and the request then runs here.
"""

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from sessions_app.database import database_sync_to_async
from sessions_app.mailbox import MailboxError, mailbox
from sessions_app.runtime.ownership import Owned, owner_of
from threads_app.models import Box
from threads_app.selectors import box_of_thread

Handler = Callable[[dict[str, Any]], Awaitable[Any]]


async def box_of(thread_id: uuid.UUID) -> Box | None:
    """The box a thread belongs to (None for an unknown thread)."""
    return await database_sync_to_async(box_of_thread)(thread_id)


async def at_thread_owner(thread_id: uuid.UUID, request: dict[str, Any], here: Handler) -> Any:
    """Serve ``request`` with ``here`` in the process running the thread's interactive session."""
    return await _at(("thread", thread_id), request, here)


async def at_box_owner(box_id: uuid.UUID, request: dict[str, Any], here: Handler) -> Any:
    """Serve ``request`` with ``here`` in the process running the box's integration sessions."""
    return await _at(("box", box_id), request, here)


async def _at(owned: Owned, request: dict[str, Any], here: Handler) -> Any:
    owner, mine = await owner_of(owned)
    if not mine:
        try:
            return await mailbox.request(owner, request)
        except MailboxError:
            owner, mine = await owner_of(owned, fresh=True)
            if not mine:
                raise
    return await here(request)
