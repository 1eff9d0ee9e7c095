"""``chat.Step`` and ``@chat.step``: the intermediate work of a turn (a tool call, a retrieval,
an LLM call), shown collapsed under the message or step that opened it.

A step is a transcript entry like a message, on the same wire events (``new_message``,
``update_message``, ``stream_start``, ``stream_token``, ``delete_message``) with the fields of
Chainlit's StepDict (``input``, ``output``, ``parentId``, ``start``, ``end``, ``isError``,
``showInput``, ``language``). It is written when it opens and again when it closes; the
tokens streamed in between go to the client only, so a streamed step costs two writes.

Nesting follows the open steps of the running hook (a context variable, so concurrent hooks
and tasks each see their own): a step opened inside another takes it as parent, a step
opened directly in ``on_message`` takes the user's message.
"""

import functools
import inspect
import json
import uuid
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Literal, ParamSpec, TypeVar, cast, overload

from sessions_app.chat.context import require_session, turn_message, turn_message_shown_as
from sessions_app.chat.sync import run_sync
from threads_app.step_budgets import StreamAllowance
from threads_app.wire import iso, parse_iso

StepType = Literal["tool", "llm", "run", "retrieval", "embedding", "rerank", "undefined"]
STEP_TYPES: frozenset[str] = frozenset(StepType.__args__)  # type: ignore[attr-defined]

# The steps open in this context, innermost last. A tuple, replaced on every change, so a
# task started inside a step inherits the stack without sharing later changes.
_open_steps: ContextVar[tuple["Step", ...]] = ContextVar("tether_open_steps", default=())

P = ParamSpec("P")
R = TypeVar("R")
# What ``@chat.step`` takes and gives back with its signature: an async or a plain function.
StepFunction = TypeVar("StepFunction", bound=Callable[..., Any])


def _as_text(value: Any) -> tuple[str, str | None]:
    """A step's input or output as text, and the language it is written in when it was not
    text already (JSON for dicts and lists)."""
    if value is None:
        return "", None
    if isinstance(value, str):
        return value, None
    if isinstance(value, (dict, list, tuple)):
        try:
            return json.dumps(value, indent=2, ensure_ascii=False, default=str), "json"
        except (TypeError, ValueError):
            return str(value), "text"
    return str(value), "text"


def current_step() -> "Step | None":
    """The innermost step open in this context."""
    stack = _open_steps.get()
    return stack[-1] if stack else None


class Step:
    """One step of a turn. Use it as ``async with chat.Step(name=..., type="tool") as step``:
    it is shown (running) when the block starts and finished, with its duration, when the
    block ends; an exception marks it as an error, is recorded in its output, and propagates."""

    def __init__(
        self,
        name: str = "",
        type: StepType = "undefined",
        *,
        id: uuid.UUID | str | None = None,
        parent_id: uuid.UUID | str | None = None,
        metadata: dict[str, Any] | None = None,
        language: str | None = None,
        show_input: bool | str = "json",
    ) -> None:
        if type not in STEP_TYPES:
            raise ValueError(f"step type {type!r} is not one of {', '.join(sorted(STEP_TYPES))}")
        self.id = uuid.UUID(str(id)) if id else uuid.uuid4()
        self.name = name
        self.type: str = type
        self.parent_id = uuid.UUID(str(parent_id)) if parent_id else None
        self.metadata = dict(metadata or {})
        self.language = language
        self.show_input = show_input
        self.is_error = False
        self._input = ""
        self._output = ""
        self.created_at: datetime | None = None
        self.start: datetime | None = None
        self.end: datetime | None = None
        self.thread_id: uuid.UUID | None = None
        self.seq: int | None = None
        self.streaming = False
        # (the turn's user message, the id its client knows it by) when nested in it.
        self._turn_parent: tuple[uuid.UUID, str] | None = None

    def __repr__(self) -> str:
        return f"Step(id={self.id}, type={self.type!r}, name={self.name!r})"

    @functools.cached_property
    def _allowances(self) -> tuple[StreamAllowance, StreamAllowance]:
        """What streamed tokens may still add to the output and to the input
        (``STEP_MAX_BYTES`` each), counted from the text there when the first one came."""
        return StreamAllowance(self._output), StreamAllowance(self._input)

    @property
    def input(self) -> str:
        return self._input

    @input.setter
    def input(self, value: Any) -> None:
        self._input, _language = _as_text(value)

    @property
    def output(self) -> str:
        return self._output

    @output.setter
    def output(self, value: Any) -> None:
        self._output, language = _as_text(value)
        if language and not self.language:
            self.language = language

    @property
    def content(self) -> str:
        """The output, under the name chat context entries read (``Message.content``)."""
        return self._output

    @classmethod
    def from_dict(cls, step: dict[str, Any]) -> "Step":
        """A persisted step (a StepDict) as the app sees it, e.g. in a rebuilt chat context."""
        kind = step.get("type") or "undefined"
        made = cls(
            step.get("name") or "",
            cast(StepType, kind if kind in STEP_TYPES else "undefined"),
            id=step["id"],
            parent_id=step.get("parentId"),
            metadata=step.get("metadata") or {},
            language=step.get("language"),
            show_input=step.get("showInput", False),
        )
        made.type = kind
        made._input = step.get("input") or ""
        made._output = step.get("output") or ""
        made.is_error = bool(step.get("isError"))
        made.seq = step.get("seq")
        made.created_at = parse_iso(step.get("createdAt"))
        made.start = parse_iso(step.get("start"))
        made.end = parse_iso(step.get("end"))
        return made

    def to_dict(self) -> dict[str, Any]:
        """The StepDict clients receive."""
        return {
            "id": str(self.id),
            "threadId": str(self.thread_id) if self.thread_id else None,
            "parentId": str(self.parent_id) if self.parent_id else None,
            "seq": self.seq,
            "type": self.type,
            "name": self.name,
            "input": self._input,
            "output": self._output,
            "metadata": self.metadata,
            "isError": self.is_error,
            "streaming": self.streaming,
            "createdAt": iso(self.created_at),
            "start": iso(self.start),
            "end": iso(self.end),
            "showInput": self.show_input,
            "language": self.language,
        }

    def shown_dict(self) -> dict[str, Any]:
        """The StepDict clients are sent live: a step nested in the turn's user message names
        it by the id its client chose, as that message is shown live (``live_user_step``)."""
        shown = self.to_dict()
        if self._turn_parent is not None and self.parent_id == self._turn_parent[0]:
            shown["parentId"] = self._turn_parent[1]
        return shown

    # --- the Message verbs --------------------------------------------------------------------

    async def send(self) -> "Step":
        """Persist the step and show it (a streamed step is finalised instead)."""
        session = require_session()
        now = datetime.now(UTC)
        if self.created_at is None:
            self.created_at = now
        if self.start is None:
            self.start = now
        was_streaming = self.streaming
        self.streaming = False
        await session.save_message(self)
        await session.emit("update_message" if was_streaming else "new_message", self.shown_dict())
        return self

    async def update(self) -> "Step":
        session = require_session()
        self.streaming = False
        if self.created_at is None:
            self.created_at = datetime.now(UTC)
        await session.save_message(self)
        await session.emit("update_message", self.shown_dict())
        return self

    async def remove(self) -> None:
        session = require_session()
        await session.delete_message(self)
        await session.emit("delete_message", self.shown_dict())

    async def stream_token(self, token: str, *, is_sequence: bool = False, is_input: bool = False) -> None:
        """Append (or with ``is_sequence``, replace) text of the output (or, with ``is_input``,
        the input) and push it to the client now; nothing is written until the step ends."""
        if not token:
            return
        session = require_session()
        if is_input:
            token = self._allowances[1].fit(token, replace=is_sequence)
            self._input = token if is_sequence else self._input + token
        else:
            token = self._allowances[0].fit(token, replace=is_sequence)
            self._output = token if is_sequence else self._output + token
        if not token and not is_sequence:
            return  # that text is full (STEP_MAX_BYTES): the rest is not shown, nor kept
        if not self.streaming:
            self.streaming = True
            now = datetime.now(UTC)
            self.created_at = self.created_at or now
            self.start = self.start or now
            self.thread_id = session.thread_id
            session.track_stream(self)
            await session.emit("stream_start", self.shown_dict())
            return
        await session.emit(
            "stream_token",
            {"id": str(self.id), "token": token, "isSequence": is_sequence, "isInput": is_input},
        )

    # --- the context manager ----------------------------------------------------------------

    def take_parent(self) -> None:
        """Nest under the innermost open step, else the turn's user message (named live by
        the id its client chose)."""
        if self.parent_id is not None:
            return
        stack = _open_steps.get()
        self.parent_id = stack[-1].id if stack else turn_message.get()
        shown_as = turn_message_shown_as.get()
        if not stack and self.parent_id is not None and shown_as is not None:
            self._turn_parent = (self.parent_id, shown_as)

    async def show_running(self) -> "Step":
        """Show the step running, without making it the current step: for code told of a
        step's start and end as two events (``chat.langchain``); ``finish()`` ends it."""
        self.start = datetime.now(UTC)
        await self.send()
        # Open until it ends: if the hook is stopped or fails before that, the session keeps
        # what the step got (``LiveSession._keep_open_streams``).
        require_session().track_stream(self)
        return self

    async def finish(self) -> "Step":
        """End a step shown with ``show_running()``: its duration, output and error are kept."""
        self.end = datetime.now(UTC)
        return await self.update()

    async def __aenter__(self) -> "Step":
        self.take_parent()
        await self.show_running()  # if sending fails, the block never ran: the step is not left open
        _open_steps.set((*_open_steps.get(), self))
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        self.end = datetime.now(UTC)
        _open_steps.set(tuple(s for s in _open_steps.get() if s is not self))
        if exc is not None and not isinstance(exc, Exception):
            # Cancelled (a stop) or the process is leaving: nothing may be awaited here; the
            # session transcribes the open step as interrupted once the hook is gone.
            return False
        if exc is not None:
            self.is_error = True
            failure = f"{type(exc).__name__}: {exc}"
            self._output = f"{self._output}\n{failure}" if self._output else failure
        await self.update()
        return False

    def __enter__(self) -> "Step":
        """``with chat.Step(...)`` in plain code (a plain hook, a ``chat.make_async`` function):
        the step is sent through ``chat.run_sync`` and is open in this thread's context."""
        self.take_parent()
        run_sync(self.__aenter__())
        _open_steps.set((*_open_steps.get(), self))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        _open_steps.set(tuple(s for s in _open_steps.get() if s is not self))
        return run_sync(self.__aexit__(exc_type, exc, tb))

    def __call__(self, func: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
        """``@chat.Step(name=..., type=...)`` used as a decorator."""
        kind = cast(StepType, self.type)  # checked when the step was made
        return step(name=self.name, type=kind, show_input=self.show_input, metadata=self.metadata)(func)


@overload
def step(func: StepFunction, /) -> StepFunction: ...


@overload
def step(
    func: None = None,
    /,
    *,
    name: str | None = None,
    type: StepType = "undefined",
    language: str | None = None,
    show_input: bool | str = "json",
    metadata: dict[str, Any] | None = None,
) -> Callable[[StepFunction], StepFunction]: ...


def step(
    func: Callable[P, Awaitable[R]] | None = None,
    /,
    *,
    name: str | None = None,
    type: StepType = "undefined",
    language: str | None = None,
    show_input: bool | str = "json",
    metadata: dict[str, Any] | None = None,
) -> Any:
    """``@chat.step`` / ``@chat.step(name=..., type="tool")``: every call is a step whose input
    is the call's arguments and whose output is its return value. On a plain function, as
    Chainlit allows, the step is sent with ``chat.run_sync``: call it from plain code (a plain
    hook, a ``chat.make_async`` function), not from the event loop."""
    if type not in STEP_TYPES:
        raise ValueError(f"step type {type!r} is not one of {', '.join(sorted(STEP_TYPES))}")

    def decorate(function: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
        if not inspect.iscoroutinefunction(function):
            return cast(Callable[P, Awaitable[R]], plain_step(cast(Callable[..., Any], function)))
        signature = inspect.signature(function)

        @functools.wraps(function)
        async def run(*args: P.args, **kwargs: P.kwargs) -> R:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            current = Step(
                name or function.__name__, type, language=language, show_input=show_input, metadata=metadata
            )
            current.input = dict(bound.arguments)  # shown while it runs
            async with current:
                result = await function(*args, **kwargs)
                if result is not None and not current.output:
                    current.output = result
                return result

        return run

    def plain_step(function: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(function)

        @functools.wraps(function)
        def run_plain(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            current = Step(
                name or function.__name__, type, language=language, show_input=show_input, metadata=metadata
            )
            current.input = dict(bound.arguments)
            with current:
                result = function(*args, **kwargs)
                if result is not None and not current.output:
                    current.output = result
                return result

        return run_plain

    return decorate(func) if func is not None else decorate
