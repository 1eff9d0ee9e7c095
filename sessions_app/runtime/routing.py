"""Running a request where a box's pool lives: in this process, or in the owner's.

A box's sessions live in exactly one process (``ownership``). A caller in any process names
the box, the request (a dict with a ``type``) and the function that serves it; ``at_owner``
runs that function here when this process owns the box, or sends the request to the owner's
mailbox, where ``runtime.owner_handlers`` maps the type to the same function, and returns the
answer. An owner that does not answer (it died, or the channel layer is down) raises
``MailboxError``; before giving up, the box is claimed afresh, which succeeds when its owner
is dead, and the request then runs here.
"""

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from sessions_app.database import database_sync_to_async
from sessions_app.mailbox import MailboxError, mailbox
from sessions_app.runtime.ownership import owner_of
from threads_app.models import Box
from threads_app.selectors import box_of_thread

Handler = Callable[[dict[str, Any]], Awaitable[Any]]


async def box_of(thread_id: uuid.UUID) -> Box | None:
    """The box a thread belongs to (None for an unknown thread)."""
    return await database_sync_to_async(box_of_thread)(thread_id)


async def at_owner(box_id: uuid.UUID, request: dict[str, Any], here: Handler) -> Any:
    """Serve ``request`` with ``here`` in the process that owns the box."""
    owner, mine = await owner_of(box_id)
    if not mine:
        try:
            return await mailbox.request(owner, request)
        except MailboxError:
            owner, mine = await owner_of(box_id, fresh=True)
            if not mine:
                raise
    return await here(request)
