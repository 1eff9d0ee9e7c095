"""Accepting a send: the one verb every path uses (the chat socket and ``POST /api/chat/send``
for engine-runtime apps, the chat socket for hooks-API apps, integration messages).

A send is accepted when its ``AcceptedMessage`` row is committed: the client's message id is
the idempotency key (within the thread: the row's key scopes it, ``AcceptedMessage.key``), so a resend (a lost ack, a retried request) finds the first record and
makes no second one; the same id with other content is a ``MessageConflict``. ``retry`` ("send
again") revives a send that failed before it was transcribed. A fresh acceptance is announced
on the thread's bus (``chat-user-message``) before the caller answers the client; what happens
next (a queue, a hook, an integration turn) is the caller's business.
"""

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sessions_app.database import database_sync_to_async
from sessions_app.thread_bus import publish_accepted
from threads_app.models import AcceptedMessage, Thread
from threads_app.services import accept_message, revive_failed


@dataclass(frozen=True)
class Acceptance:
    record: AcceptedMessage
    created: bool  # this request made the record
    revived: bool  # a failed send brought back by ``retry``
    read: Any = None  # what ``with_read`` returned, read in the same database call

    @property
    def fresh(self) -> bool:
        """The send is new work (made or revived now), not a repeat of one already handled."""
        return self.created or self.revived


async def accept_send(
    *,
    thread: Thread,
    author: Any,
    message_id: uuid.UUID,
    text: str,
    source: str,
    images: list[dict[str, Any]] | None = None,
    session_id: uuid.UUID | None = None,
    holder: str = "",
    retry: bool = False,
    queued: bool | None = None,
    with_read: Callable[[], Any] | None = None,
) -> Acceptance:
    """Commit the send (or find it) and, when it is new work, announce it. ``queued``, when
    the caller knows it already, is stored with the record (repeats answer with it).
    ``with_read``: a read the caller needs next, made in the same database call."""
    images = images or []
    record, created, read = await database_sync_to_async(_accept_and_read)(
        with_read,
        message_id=message_id,
        thread=thread,
        author=author,
        text=text,
        images=images,
        source=source,
        session_id=session_id,
        holder=holder,
        queued=queued,
    )
    revived = not created and retry and await database_sync_to_async(revive_failed)(record.pk, holder=holder)
    if revived:
        record.state, record.failure, record.queued = AcceptedMessage.State.PENDING, "", None
    if created or revived:
        await publish_accepted(record, author=author.get_username(), image_count=len(images))
    return Acceptance(record, created, revived, read)


def _accept_and_read(read: Callable[[], Any] | None, **send: Any) -> tuple[AcceptedMessage, bool, Any]:
    record, created = accept_message(**send)
    return record, created, read() if read is not None else None
