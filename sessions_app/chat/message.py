"""``chat.Message``: a transcript entry an app sends, streams, updates or removes."""

import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sessions_app.chat.actions import Action
from sessions_app.chat.context import require_session
from threads_app.step_budgets import StreamAllowance
from threads_app.wire import iso, live_user_step

if TYPE_CHECKING:
    from sessions_app.chat.elements import Element


class Message:
    """A message of the conversation. ``send()`` persists it as a Step and emits it."""

    def __init__(
        self,
        content: str = "",
        *,
        author: str = "assistant",
        type: str = "assistant_message",
        id: uuid.UUID | str | None = None,
        parent_id: uuid.UUID | str | None = None,
        metadata: dict[str, Any] | None = None,
        is_error: bool = False,
        actions: list[Action] | None = None,
        elements: "list[Element] | None" = None,
    ) -> None:
        self.id = uuid.UUID(str(id)) if id else uuid.uuid4()
        self.content = content
        self.author = author
        self.type = type
        self.parent_id = uuid.UUID(str(parent_id)) if parent_id else None
        self.metadata = metadata or {}
        self.is_error = is_error
        # Files attached to the message: sent after it (``send``), or a user's uploads.
        self.elements: list[Element] = list(elements or [])
        self.created_at: datetime | None = None
        self.thread_id: uuid.UUID | None = None
        self.seq: int | None = None
        self.streaming = False
        # What a stream may still add (``STEP_MAX_BYTES``), from its first token on.
        self._allowance = StreamAllowance()
        # Buttons under the message (``chat.Action``), kept in its step's metadata.
        self.actions: list[Action] = list(actions or [])
        for action in self.actions:
            action.attach(self)

    def __repr__(self) -> str:
        return f"Message(id={self.id}, type={self.type!r}, content={self.content[:40]!r})"

    @classmethod
    def from_step(cls, step: dict[str, Any]) -> "Message":
        message = cls(
            step.get("output") or "",
            author=step.get("name") or "",
            type=step.get("type") or "assistant_message",
            id=step["id"],
            parent_id=step.get("parentId"),
            metadata=step.get("metadata") or {},
            is_error=bool(step.get("isError")),
            actions=[Action.from_dict(a) for a in (step.get("metadata") or {}).get("actions") or []],
        )
        message.seq = step.get("seq")
        if step.get("createdAt"):
            message.created_at = datetime.fromisoformat(step["createdAt"].replace("Z", "+00:00"))
        return message

    def to_dict(self) -> dict[str, Any]:
        """The StepDict clients receive."""
        created = iso(self.created_at)
        if self.actions or "actions" in self.metadata:
            self.metadata = {**self.metadata, "actions": [a.to_dict() for a in self.actions]}
        return {
            "id": str(self.id),
            "threadId": str(self.thread_id) if self.thread_id else None,
            "parentId": str(self.parent_id) if self.parent_id else None,
            "seq": self.seq,
            "type": self.type,
            "name": self.author,
            "output": self.content,
            "metadata": self.metadata,
            "isError": self.is_error,
            "streaming": self.streaming,
            "createdAt": created,
            "start": created,
            "end": None if self.streaming else created,
        }

    def shown_dict(self) -> dict[str, Any]:
        """The StepDict clients are sent live: a user's message under the id its client chose,
        as its turn showed it (``live_user_step``), so an edit's update or removal reaches the
        copy Chainlit's client holds."""
        return live_user_step(self.to_dict())

    async def send(self) -> "Message":
        """Persist the message and show it; a streamed message is finalised instead."""
        session = require_session()
        if self.created_at is None:
            self.created_at = datetime.now(UTC)
        was_streaming = self.streaming
        self.streaming = False
        event = "update_message" if was_streaming else "new_message"
        if session.defer_reply(self, event):  # written with the turn's release (``replies``)
            return self
        await session.save_message(self)
        await session.emit(event, self.shown_dict())
        for action in self.actions:  # Chainlit's clients learn of actions one by one
            await session.emit("action", action.to_dict())
        for element in self.elements:
            await element.send(for_id=self.id)
        return self

    async def stream_token(self, token: str, *, is_sequence: bool = False) -> None:
        """Append (or with ``is_sequence``, replace) text and push it to the client now."""
        session = require_session()
        if not self.streaming:
            self.streaming = True
            if self.created_at is None:
                self.created_at = datetime.now(UTC)
            self.thread_id = session.thread_id
            self._allowance = StreamAllowance(self.content)
            session.track_stream(self)
            await session.emit("stream_start", self.shown_dict())
        token = self._allowance.fit(token, replace=is_sequence)
        if not token and not is_sequence:
            return  # the step is full (STEP_MAX_BYTES): the rest is not shown, nor kept
        self.content = token if is_sequence else self.content + token
        await session.emit(
            "stream_token", {"id": str(self.id), "token": token, "isSequence": is_sequence, "isInput": False}
        )

    async def update(self) -> "Message":
        session = require_session()
        self.streaming = False
        if self.created_at is None:
            self.created_at = datetime.now(UTC)
        await session.save_message(self)
        await session.emit("update_message", self.shown_dict())
        return self

    async def remove_actions(self) -> None:
        """Take every button off the message."""
        for action in list(self.actions):
            await action.remove()

    async def remove(self) -> None:
        session = require_session()
        await session.delete_message(self)
        await session.emit("delete_message", self.shown_dict())
