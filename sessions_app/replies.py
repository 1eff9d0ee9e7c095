"""A hooks-API reply written together with the turn's release: ``Message.send()`` as the
turn's last write costs no database trip of its own.

``send()`` inside a running hook does not write at once: it keeps the message as the session's
pending reply and schedules a flush with ``loop.call_soon``. Then one of two things happens
first:

- the hook returns without suspending again (the common ``await Message(...).send()`` as a
  hook's last line): the turn reaches its release in the same step of its task, before the
  flush can run, and the reply's row rides the release's database call (``turns._release``:
  reply, the send's outcome, the claim's release);
- the hook suspends (any real await: a sleep, a model call, a database call): the event loop
  runs the flush, which writes the reply and shows it, as an undeferred send would have.
  Anything the session writes or shows before then (``LiveSession.save_message``, ``emit``,
  ``delete_message``, an element's send) flushes the reply first, so the transcript and the
  events keep their order.

Why this is sound: a deferred reply is shown (``new_message``) only after its row is
committed, never before. A process that dies holding one loses a reply nobody saw, in a turn
cut before its end, which recovery closes with a visible error like any turn cut by a crash
(its send is transcribed with no outcome). A hook that runs long after its send does not hold
the reply back: the flush runs as soon as the hook first waits. The reply is committed before
``task_end`` either way (the release, or the flush it waits for, comes first).

Not deferred: a message with actions or elements (their events follow it at once), a send
outside the session's running hook (a lifecycle handler's, an error report), a second reply
while one is pending (the first is flushed by the second's save).
"""

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sessions_app.chat.message import Message


@dataclass
class PendingReply:
    """A reply ``send()`` kept for the turn's release: the message, the event that shows it,
    and its step as written."""

    message: "Message"
    event: str
    step: dict[str, Any]


class ReplySlot:
    """The session's one pending reply, and the lock that orders its flush before whatever
    the session writes or shows next."""

    def __init__(self) -> None:
        self.pending: PendingReply | None = None
        self.lock = asyncio.Lock()
        self.flushing: asyncio.Future[None] | None = None  # the scheduled flush (kept referenced)

    def busy(self) -> bool:
        """A reply is pending or being flushed: callers must wait for it first."""
        return self.pending is not None or self.lock.locked()

    def take(self) -> PendingReply | None:
        pending, self.pending = self.pending, None
        return pending
