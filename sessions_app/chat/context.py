"""What a hook sees of its session: the current session, its user session and chat context."""

import uuid
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from sessions_app.chat.message import Message
    from sessions_app.chat.step import Step
    from sessions_app.live import LiveSession

    # What the chat context holds: the messages and the steps of the conversation.
    Entry: TypeAlias = Message | Step

current_session: ContextVar["LiveSession | None"] = ContextVar("tether_current_session", default=None)

# The user message the running hook answers: the parent of the steps it opens at top level.
turn_message: ContextVar[uuid.UUID | None] = ContextVar("tether_turn_message", default=None)
# The id the sending client knows that message by (the one it chose; ``wire.live_user_step``):
# the steps nested in it name it as their parent when shown live, so Chainlit's client, which
# nests a step under its parent or drops it, finds the message it drew.
turn_message_shown_as: ContextVar[str | None] = ContextVar("tether_turn_message_shown_as", default=None)


def require_session() -> "LiveSession":
    session = current_session.get()
    if session is None:
        raise RuntimeError("no chat session here: call this from inside a hook")
    return session


# Keys of the user session that mirror session fields; they are read-only for apps.
SYSTEM_KEYS = frozenset(
    {"id", "env", "chat_settings", "chat_settings_inputs", "chat_profile", "client_type", "user"}
)


class UserSessionAccessor:
    """``chat.user_session``: per-session key/value state, persisted when it is JSON."""

    def get(self, key: str, default: Any = None) -> Any:
        session = require_session()
        if key in SYSTEM_KEYS:
            return session.system_value(key)
        return session.user_session.get(key, default)

    def set(self, key: str, value: Any) -> None:
        if key in SYSTEM_KEYS:
            raise KeyError(f"{key!r} is managed by Tether and cannot be set")
        require_session().user_session[key] = value


# How far from the end ``ChatContext.add`` looks for the earlier copy of a message added again.
REPLACE_SCAN = 8


class ChatContext:
    """A session's conversation (messages and steps), in transcript order and deduplicated by
    step id.

    Messages with a transcript ``seq`` sort by it; messages not yet written sort after
    them in the order they were added. Adding the same id again replaces the entry, so
    rebuilding from the transcript twice yields the same list.

    ``load`` takes the entries of a transcript read as a function, called when the context
    is first read (``get``, ``len``, ``remove``): a resume of 5000 steps made 5000
    ``chat.Message`` objects before its history was sent (20 ms, and the garbage collector's
    walks over them), for an ``on_chat_resume`` that most often never reads them. An ``add``
    meanwhile (a message the hook sends) waits behind the load, in order.
    """

    def __init__(self) -> None:
        self._messages: dict[uuid.UUID, Entry] = {}
        self._order: dict[uuid.UUID, int] = {}
        self._counter = 0
        # The sorted list, kept between reads: a hook that reads the context every turn would
        # otherwise sort the whole conversation every turn. A new message that sorts last (the
        # usual case) is appended to it; anything else sorts again on the next read.
        self._sorted: list[Entry] | None = []
        # Entries loaded but not made yet (``load``) and those added after them, in order:
        # added when the context is read.
        self._pending: list[Callable[[], Iterable[Entry]]] = []

    def _key(self, message: "Entry") -> tuple[float, int]:
        return (message.seq if message.seq is not None else float("inf"), self._order[message.id])

    def load(self, entries: "Callable[[], Iterable[Entry]]") -> None:
        """Add what ``entries()`` gives, in that order, when the context is next read."""
        self._pending.append(entries)

    def _made(self) -> None:
        while self._pending:
            for message in self._pending.pop(0)():
                self._add(message)

    def add(self, message: "Entry") -> None:
        if self._pending:
            self._pending.append(lambda: (message,))
            return
        self._add(message)

    def _add(self, message: "Entry") -> None:
        new = message.id not in self._order
        if new:
            self._order[message.id] = self._counter
            self._counter += 1
        self._messages[message.id] = message
        if self._sorted is None:
            return
        if new:
            if not self._sorted or self._key(self._sorted[-1]) <= self._key(message):
                self._sorted.append(message)
            else:
                self._sorted = None
        elif not self._replace_in_place(message):
            self._sorted = None

    def _replace_in_place(self, message: "Entry") -> bool:
        """Put ``message`` where its earlier copy was in the sorted list, if it still sorts
        there: a turn's user message gets its ``seq`` once written, and it is among the last
        few entries, so every turn would otherwise sort the whole conversation again."""
        assert self._sorted is not None
        for index in range(len(self._sorted) - 1, max(-1, len(self._sorted) - 1 - REPLACE_SCAN), -1):
            if self._sorted[index].id != message.id:
                continue
            key = self._key(message)
            before = index == 0 or self._key(self._sorted[index - 1]) <= key
            after = index == len(self._sorted) - 1 or key <= self._key(self._sorted[index + 1])
            if before and after:
                self._sorted[index] = message
                return True
            return False
        return False

    def remove(self, message: "Entry") -> bool:
        self._made()
        self._order.pop(message.id, None)
        self._sorted = None
        return self._messages.pop(message.id, None) is not None

    def get(self) -> list["Entry"]:
        self._made()
        if self._sorted is None:
            self._sorted = sorted(self._messages.values(), key=self._key)
        return list(self._sorted)

    def clear(self) -> None:
        self._pending.clear()
        self._messages.clear()
        self._order.clear()
        self._sorted = []

    def __len__(self) -> int:
        self._made()
        return len(self._messages)


class ChatContextAccessor:
    """``chat.chat_context``: the current session's ChatContext."""

    def get(self) -> list["Entry"]:
        return require_session().chat_context.get()

    def __len__(self) -> int:
        return len(require_session().chat_context)

    def to_openai(self) -> list[dict[str, str]]:
        """The messages as OpenAI chat messages; steps (tool calls and the like) are left out."""
        roles = {"user_message": "user", "assistant_message": "assistant"}
        return [
            {"role": roles.get(m.type, "system"), "content": m.content}
            for m in self.get()
            if "message" in m.type
        ]


user_session = UserSessionAccessor()
chat_context = ChatContextAccessor()
