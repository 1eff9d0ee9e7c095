"""Tether's message union, and the one adapter from engine messages to it.

Both session kinds consume ``ChatMessage`` values produced by ``adapt``; each has an
exhaustive ``match`` ending in ``assert_never``, so adding a member here without handling it
fails the type check and the tests instead of being dropped silently.
"""

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SystemInit:
    """The engine's conversation id (fresh or resumed)."""

    engine_session_id: str


@dataclass(frozen=True)
class StreamDelta:
    """A piece of assistant text as it is generated."""

    message_id: str
    text: str


@dataclass(frozen=True)
class AssistantText:
    """A complete assistant message."""

    message_id: str
    text: str


@dataclass(frozen=True)
class ToolCall:
    tool_use_id: str
    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class ToolOutput:
    tool_use_id: str
    output: str
    is_error: bool


@dataclass(frozen=True)
class TaskEvent:
    """A background task's lifecycle event (started, progress, done)."""

    task_id: str
    status: str
    description: str = ""


@dataclass(frozen=True)
class TurnResult:
    """The end of a turn."""

    engine_session_id: str
    outcome: str  # "success" | "error" | "interrupted"
    is_error: bool
    text: str | None = None


@dataclass(frozen=True)
class UnknownMessage:
    """An engine message of a type this adapter does not know: surfaced, logged, counted."""

    raw: dict[str, Any] = field(default_factory=dict)


ChatMessage = (
    SystemInit | StreamDelta | AssistantText | ToolCall | ToolOutput | TaskEvent | TurnResult | UnknownMessage
)


class _Counter:
    """How many unknown engine messages this process has seen (guarded by a lock)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.value = 0

    def bump(self) -> int:
        with self._lock:
            self.value += 1
            return self.value


unknown_messages = _Counter()


# Engine messages with nothing in them for a chat, dropped on purpose (listed, so that a type
# nobody thought about still surfaces as UnknownMessage).
IGNORED_TYPES = frozenset(
    {"tool_progress", "auth_status", "tool_use_summary", "rate_limit_event", "prompt_suggestion"}
)
IGNORED_SYSTEM_SUBTYPES = frozenset(
    {"status", "compact_boundary", "hook_started", "hook_progress", "hook_response"}
)


def adapt(raw: dict[str, Any]) -> list[ChatMessage]:
    """Map one engine message to zero or more union members (an assistant message with a
    text block and a tool call yields both)."""
    kind = raw.get("type")
    if kind in IGNORED_TYPES or (kind == "system" and raw.get("subtype") in IGNORED_SYSTEM_SUBTYPES):
        return []
    if kind == "system" and raw.get("subtype") == "init":
        return [SystemInit(str(raw["session_id"]))]
    if kind == "stream_event":
        return [StreamDelta(str(raw.get("message_id", "")), str(raw.get("delta", "")))]
    if kind == "assistant":
        out: list[ChatMessage] = []
        texts = []
        for block in raw.get("content", []):
            if block.get("type") == "text":
                texts.append(block.get("text", ""))
            elif block.get("type") == "tool_use":
                out.append(
                    ToolCall(str(block["id"]), str(block.get("name", "")), dict(block.get("input") or {}))
                )
        if texts:
            out.append(AssistantText(str(raw.get("message_id", "")), "".join(texts)))
        return out
    if kind == "user":
        return [
            ToolOutput(str(b["tool_use_id"]), _text_of(b.get("content")), bool(b.get("is_error")))
            for b in raw.get("content", [])
            if b.get("type") == "tool_result"
        ]
    if kind == "task":
        return [
            TaskEvent(
                str(raw.get("task_id", "")), str(raw.get("status", "")), str(raw.get("description", ""))
            )
        ]
    if kind == "result":
        return [
            TurnResult(
                str(raw.get("session_id", "")),
                str(raw.get("subtype", "success")),
                bool(raw.get("is_error")),
                raw.get("result"),
            )
        ]
    seen = unknown_messages.bump()
    logger.warning("unknown engine message type %r (%d so far)", kind, seen)
    return [UnknownMessage(raw)]


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return "" if content is None else str(content)
