"""The engine protocol: ``Engine.start(resume=...) -> Run``.

A Run is one open conversation with an engine. It takes user turns, yields *engine messages*
(plain dicts, the engine wire format below) until it closes, can be interrupted mid-turn and
closed, and signals its close through ``closed``.

Engine wire format (every engine produces these; ``runtime.messages.adapt`` maps them to
Tether's message union):

- ``{"type": "system", "subtype": "init", "session_id": str}``: the engine's conversation id,
  sent when a run starts (a resumed run reports the id it resumed);
- ``{"type": "stream_event", "message_id": str, "delta": str}``: a piece of assistant text;
- ``{"type": "assistant", "message_id": str, "content": [block, ...]}``: a complete assistant
  message; blocks are ``{"type": "text", "text"}`` or ``{"type": "tool_use", "id", "name", "input"}``;
- ``{"type": "user", "content": [{"type": "tool_result", "tool_use_id", "content", "is_error"}]}``:
  tool results the engine fed back to itself;
- ``{"type": "task", "task_id": str, "status": str, "description": str}``: background task events;
- ``{"type": "result", "subtype": "success" | "error" | "interrupted", "session_id": str,
  "is_error": bool, "result": str | None, "num_turns": int}``: the end of a turn.

Guarantees every engine keeps:

- a run answers turns one at a time, in the order sent, with exactly one ``result`` per turn
  it took, unless the run closes first;
- ``interrupt()`` ends the turn in flight with an ``interrupted`` result; with no turn in
  flight it does nothing;
- ``close()`` is graceful: it takes no new turns, lets the turn in flight finish for a short
  grace period, then ends it without a result; ``messages()`` ends and ``closed`` is set.
  (``ChatSession.stop()`` interrupts first, so a stop is immediate.)
- ``messages()`` has a single reader, the pump.
"""

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from threads_app.models import AcceptedMessage


@dataclass
class UserTurn:
    """What the engine is asked in one turn: text and image blocks, and the sends it answers.
    Several queued sends merge into one turn.

    ``accepted_ids`` are the sends' stored keys (``AcceptedMessage.pk``), what the runtime
    and the database use; ``message_ids`` are the same sends' ids as their client chose them,
    in the same order, what the transcript and the wire show (a turn made without a client,
    in tests of the runtime, may leave them empty).
    """

    text: str
    images: list[dict[str, Any]] = field(default_factory=list)
    accepted_ids: list[uuid.UUID] = field(default_factory=list)
    message_ids: list[uuid.UUID] = field(default_factory=list)
    # Sends whose first answer said "not queued" and whose ``queued`` the user step's write
    # records (``chats.submit_here``): no trip of their own.
    unqueued_ids: list[uuid.UUID] = field(default_factory=list)
    # When the earliest of its sends was accepted (wall clock, ``sessions_app.metrics``): the
    # arrival's clock, or the record's ``accepted_at``; None in tests that make turns by hand.
    accepted_at: float | None = None
    # The trace its send was accepted in (W3C headers, ``chatproject.tracing.carrier``); None
    # with traces off, and for sends the runtime picks up from the database.
    trace: dict[str, str] | None = None

    def content_blocks(self) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = [*self.images]
        if self.text:
            blocks.append({"type": "text", "text": self.text})
        return blocks

    @classmethod
    def merge(cls, turns: list["UserTurn"]) -> "UserTurn":
        """All queued turns as one: texts joined by a blank line, images and ids concatenated."""
        return cls(
            text="\n\n".join(t.text for t in turns if t.text),
            images=[image for t in turns for image in t.images],
            accepted_ids=[i for t in turns for i in t.accepted_ids],
            message_ids=[i for t in turns for i in t.message_ids],
            unqueued_ids=[i for t in turns for i in t.unqueued_ids],
            accepted_at=min((t.accepted_at for t in turns if t.accepted_at is not None), default=None),
            trace=next((t.trace for t in turns if t.trace is not None), None),
        )

    @classmethod
    def of_send(cls, send: "AcceptedMessage") -> "UserTurn":
        """The turn answering one accepted send."""
        accepted = getattr(send, "accepted_at", None)
        return cls(
            text=send.text,
            images=list(send.images),
            accepted_ids=[send.pk],
            message_ids=[send.client_id],
            accepted_at=accepted.timestamp() if accepted is not None else None,
        )


class Run(Protocol):
    closed: asyncio.Event

    async def send(self, turn: UserTurn) -> None: ...

    def messages(self) -> AsyncIterator[dict[str, Any]]: ...

    async def interrupt(self) -> None: ...

    async def close(self) -> None: ...


class Engine(Protocol):
    async def start(self, *, resume: str | None = None) -> Run: ...


class Rewinds(Protocol):
    """An engine that can forget the end of a conversation: the turns after its first
    ``turns_kept`` (a user edited a sent message). Called while no run of the conversation is
    open; the next run resumes it rewound. Engines without ``rewind`` keep a memory of their
    own that cannot be cut (Claude Code's session): their chats refuse edits."""

    async def rewind(self, conversation_id: str, turns_kept: int) -> None: ...


class EngineError(RuntimeError):
    """The engine could not start or failed in a way the run cannot recover from."""
