"""The Claude engine: a Run on the real Claude Agent SDK (``claude_agent_sdk.ClaudeSDKClient``).

How the SDK is driven
---------------------
``ClaudeSDKClient`` spawns the Claude Code CLI (``options["cli_path"]``, else the CLI bundled in
the wheel, else ``claude`` on PATH) as
``claude --output-format stream-json --verbose ... --input-format stream-json``, does the
``initialize`` control-request handshake in ``connect()``, and keeps stdin open: every turn is
one ``{"type": "user", ...}`` line written by ``query()``; answers come back from
``receive_messages()`` as typed SDK messages until the process ends.

The client must not be shared between async contexts (its docstring: it holds background read
tasks from ``connect()`` to ``disconnect()``, and ``disconnect()`` must run where ``connect()``
did). So a run owns exactly one *owner task* for the client's whole life. The owner connects,
then runs two children of its own -- a reader (``receive_messages()`` -> wire dicts -> an
output queue) and a writer (turns and interrupts from a command queue -> ``query()`` /
``interrupt()``) -- and, when either ends (``close()``, or the CLI exited), cancels both and
disconnects, still inside itself. Callers (session pumps, Channels consumers) only ever touch
the two asyncio queues, never the client.

Turns go in as dict messages so image blocks pass through verbatim (``query()`` writes the dict
as one JSON line), each stamped with a fresh top-level ``uuid``: the CLI echoes the uuids a turn
took in on its ``result`` (``user_message_uuid(s)``), which is how a result is matched to *our*
prompt (see ``_Translator.claim``).

A fresh run coins its conversation id up front (``--session-id=<uuid4>``) and a resumed run
passes ``--resume=<id>``; either way the id is reported as ``system``/``init`` as soon as the
handshake is done, because the CLI itself only sends ``init`` when the first turn starts (and
then again every turn; repeats of a known id are not re-reported).
"""

import asyncio
import contextlib
import dataclasses
import logging
import typing
import uuid
from collections import deque
from collections.abc import AsyncIterator
from typing import Any, cast

from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    ConversationResetMessage,
    PermissionMode,
    RateLimitEvent,
    ResultMessage,
    ServerToolResultBlock,
    ServerToolUseBlock,
    StreamEvent,
    SystemMessage,
    TaskNotificationMessage,
    TaskProgressMessage,
    TaskStartedMessage,
    TaskUpdatedMessage,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)

from sessions_app.runtime.engines.base import EngineError, UserTurn
from sessions_app.runtime.engines.options import Option, not_blank, one_of, positive

logger = logging.getLogger(__name__)

# The SDK refuses stdout lines over 1 MB by default; a tool result carrying an image (Read on a
# photo) is bigger than that, and one oversized line would end the whole run.
LINE_LIMIT = 64 * 1024 * 1024
# The SDK's own initialize timeout is 60 s; leave it room to report its own error first.
START_TIMEOUT = 90.0
INTERRUPT_TIMEOUT = 10.0
# ``disconnect()`` bounds itself (5 s for the CLI to exit on stdin EOF, then SIGTERM, SIGKILL).
CLOSE_TIMEOUT = 30.0
# ``ResultMessage.terminal_reason`` values that mean the turn was cancelled by an interrupt.
ABORTED_REASONS = frozenset({"aborted_streaming", "aborted_tools"})
# ``ClaudeAgentOptions`` fields the engine sets itself; ``sdk_options`` may not override them.
RESERVED_SDK_OPTIONS = frozenset({"resume", "session_id", "include_partial_messages", "stderr"})
# Fields ``agent_options`` passes from the box's top-level options: ``sdk_options`` repeating
# one would pass it twice.
TOP_LEVEL_SDK_OPTIONS = frozenset(
    {"model", "cwd", "cli_path", "system_prompt", "permission_mode", "env", "max_buffer_size"}
)
SDK_FIELDS = frozenset(f.name for f in dataclasses.fields(ClaudeAgentOptions))


def _sdk_options_error(value: dict[str, Any]) -> str | None:
    if reserved := sorted(RESERVED_SDK_OPTIONS & set(value)):
        return f"may not set {', '.join(reserved)}: the engine sets them itself"
    if top_level := sorted(TOP_LEVEL_SDK_OPTIONS & set(value)):
        return f"may not set {', '.join(top_level)}: set them as options of their own"
    if unknown := sorted(set(value) - SDK_FIELDS):
        return f"unknown ClaudeAgentOptions field(s): {', '.join(unknown)}"
    return None


def _env_error(value: dict[str, Any]) -> str | None:
    bad = sorted(k for k, v in value.items() if not isinstance(v, str | int | float) or isinstance(v, bool))
    return f"values must be strings or numbers ({', '.join(bad)})" if bad else None


class ClaudeEngine:
    """Options (all optional): ``cli_path``, ``model``, ``cwd``, ``system_prompt`` (a string or
    an SDK preset/custom dict), ``append_system_prompt`` (appended to the ``claude_code``
    preset when no ``system_prompt`` is given), ``permission_mode``, ``env`` (extra environment
    for the CLI), ``max_buffer_size``, and ``sdk_options`` (any other ``ClaudeAgentOptions``
    field, passed through)."""

    OPTIONS = {
        "cli_path": Option("string", check=not_blank),
        "model": Option("string", check=not_blank),
        "cwd": Option("string", check=not_blank),
        "system_prompt": Option("string or object"),
        "append_system_prompt": Option("string"),
        "permission_mode": Option("string", check=one_of(*typing.get_args(PermissionMode))),
        "env": Option("object", check=_env_error),
        "max_buffer_size": Option("integer", check=positive),
        "sdk_options": Option("object", check=_sdk_options_error),
    }

    def __init__(self, options: dict[str, Any]) -> None:
        self.options = dict(options)
        reserved = RESERVED_SDK_OPTIONS & set(self.options.get("sdk_options") or {})
        if reserved:
            raise EngineError(f"sdk_options may not set {sorted(reserved)}: the engine sets them itself")

    def agent_options(self, *, resume: str | None, session_id: str | None, stderr: Any) -> ClaudeAgentOptions:
        o = self.options
        system_prompt = o.get("system_prompt")
        if system_prompt is None and o.get("append_system_prompt"):
            system_prompt = {
                "type": "preset",
                "preset": "claude_code",
                "append": str(o["append_system_prompt"]),
            }
        try:
            return ClaudeAgentOptions(
                resume=resume,
                session_id=session_id,
                include_partial_messages=True,
                model=o.get("model"),
                cwd=o.get("cwd"),
                cli_path=o.get("cli_path"),
                system_prompt=system_prompt,
                permission_mode=o.get("permission_mode"),
                env={str(k): str(v) for k, v in (o.get("env") or {}).items()},
                max_buffer_size=int(o.get("max_buffer_size") or LINE_LIMIT),
                stderr=stderr,
                **(o.get("sdk_options") or {}),
            )
        except (TypeError, ValueError) as exc:
            raise EngineError(f"bad Claude engine options: {exc}") from exc

    async def start(self, *, resume: str | None = None) -> "ClaudeRun":
        """Spawn the CLI and finish the handshake; raises ``EngineError`` if it cannot."""
        # Coin the id of a fresh conversation so it is known before the first turn.
        session_id = resume or str(uuid.uuid4())
        stderr_tail: deque[str] = deque(maxlen=20)

        def on_stderr(line: str) -> None:
            stderr_tail.append(line)
            logger.debug("claude cli: %s", line)

        options = self.agent_options(
            resume=resume, session_id=None if resume else session_id, stderr=on_stderr
        )
        run = ClaudeRun(options, session_id=session_id, stderr_tail=stderr_tail)
        await run.start()
        return run


@dataclasses.dataclass
class _Command:
    kind: str  # "send" | "interrupt"
    done: "asyncio.Future[None]"
    message: dict[str, Any] | None = None


class ClaudeRun:
    """One connected ``ClaudeSDKClient``. ``closed`` is set once the owner task has disconnected."""

    def __init__(self, options: ClaudeAgentOptions, *, session_id: str, stderr_tail: deque[str]) -> None:
        self.closed = asyncio.Event()
        self._options = options
        self._stderr_tail = stderr_tail
        self._translator = _Translator()
        self._reported_session_id = session_id
        self._commands: asyncio.Queue[_Command | None] = asyncio.Queue()
        self._out: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()  # None ends the stream
        self._connected: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._accepting = False
        self._children: set[asyncio.Task[None]] = set()
        self._task: asyncio.Task[None] | None = None
        self._error: BaseException | None = None
        self._error_raised = False

    @property
    def session_id(self) -> str | None:
        """The conversation id last reported (coined, resumed, or the CLI's own)."""
        return self._translator.session_id or self._reported_session_id

    async def start(self) -> None:
        self._task = asyncio.create_task(self._own(), name="claude-engine-run")
        try:
            await asyncio.wait_for(asyncio.shield(self._connected), START_TIMEOUT)
        except TimeoutError:
            await self._abandon()
            raise EngineError(
                f"the Claude CLI did not finish its handshake in {START_TIMEOUT:.0f} s"
            ) from None
        except asyncio.CancelledError:
            await self._abandon()
            raise

    async def _abandon(self) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.wait({self._task}, timeout=CLOSE_TIMEOUT)
        if self._connected.done() and not self._connected.cancelled():
            self._connected.exception()  # retrieved: nobody else will

    # --- the owner task -------------------------------------------------------------------

    async def _own(self) -> None:
        client = ClaudeSDKClient(self._options)
        try:
            try:
                await client.connect()
            except Exception as exc:
                self._connected.set_exception(
                    EngineError(self._describe(f"could not start the Claude CLI: {exc}"))
                )
                return
            self._accepting = True
            self._translator.session_id = self._reported_session_id
            self._out.put_nowait(
                {"type": "system", "subtype": "init", "session_id": self._reported_session_id}
            )
            self._connected.set_result(None)
            reader = asyncio.create_task(self._read(client), name="claude-engine-reader")
            writer = asyncio.create_task(self._write(client), name="claude-engine-writer")
            try:
                await asyncio.wait({reader, writer}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                self._accepting = False
                tasks = [reader, writer, *self._children]
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                self._refuse_waiting_commands()
                try:
                    await client.disconnect()
                except Exception:
                    logger.warning("disconnecting the Claude CLI failed", exc_info=True)
        finally:
            if not self._connected.done():
                self._connected.set_exception(EngineError("the Claude engine stopped before it started"))
            self._accepting = False
            self._out.put_nowait(None)
            self.closed.set()

    async def _read(self, client: ClaudeSDKClient) -> None:
        """Translate every SDK message; ends when the CLI's stdout does."""
        try:
            async for message in client.receive_messages():
                for wire in self._translator.translate(message):
                    self._out.put_nowait(wire)
        except Exception as exc:
            # ProcessError (the CLI exited non-zero), ResultError, a malformed line...
            self._error = exc
            logger.warning("%s", self._describe(f"the Claude CLI stream ended with an error: {exc}"))

    async def _write(self, client: ClaudeSDKClient) -> None:
        """Feed queued turns to ``query()`` in order; a ``None`` command means close."""
        while (command := await self._commands.get()) is not None:
            if command.kind == "interrupt":
                # Concurrently: an interrupt waits for its control response, turns must not.
                task = asyncio.create_task(self._interrupt(client, command.done))
                self._children.add(task)
                task.add_done_callback(self._children.discard)
                continue
            assert command.message is not None
            try:
                await client.query(_once(command.message))
            except Exception as exc:
                self._translator.forget(str(command.message["uuid"]))
                _settle(command.done, EngineError(f"the Claude CLI did not take the turn: {exc}"))
            else:
                _settle(command.done)
            finally:  # cancelled by the owner's teardown: the sender must not wait forever
                _settle(command.done, EngineError("the Claude engine closed"))

    async def _interrupt(self, client: ClaudeSDKClient, done: "asyncio.Future[None]") -> None:
        try:
            await client.interrupt()
        except Exception as exc:
            _settle(done, EngineError(f"interrupt failed: {exc}"))
        else:
            _settle(done)
        finally:
            _settle(done, EngineError("the Claude engine closed"))

    def _refuse_waiting_commands(self) -> None:
        while not self._commands.empty():
            command = self._commands.get_nowait()
            if command is not None:
                _settle(command.done, EngineError("the Claude engine closed"))

    def _describe(self, text: str) -> str:
        if self._stderr_tail:
            text += " (stderr: " + " | ".join(self._stderr_tail) + ")"
        return text

    # --- the Run protocol -----------------------------------------------------------------

    async def send(self, turn: UserTurn) -> None:
        """Write one user message; returns once the CLI's stdin has it."""
        if not self._accepting:
            raise EngineError("the Claude engine is not running")
        message: dict[str, Any] = {
            "type": "user",
            "message": {"role": "user", "content": turn.content_blocks()},
            "parent_tool_use_id": None,
            "session_id": "default",  # what the SDK itself sends; the CLI keys on its own id
            "uuid": str(uuid.uuid4()),
        }
        self._translator.expect(message["uuid"])
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._commands.put_nowait(_Command("send", done, message))
        await done

    async def messages(self) -> AsyncIterator[dict[str, Any]]:
        """The wire messages, ending when the run closes; raises ``EngineError`` at the end if
        the CLI failed (exited non-zero, wrote a line the SDK could not read)."""
        while (item := await self._out.get()) is not None:
            yield item
        self._out.put_nowait(None)  # a later iteration ends at once too
        if self._error is not None and not self._error_raised:
            self._error_raised = True
            raise EngineError(self._describe(f"the Claude CLI failed: {self._error}")) from self._error

    async def interrupt(self) -> None:
        """Ask the CLI to abort the turn in flight; the turn then ends with an ``interrupted``
        result. Never raises: an interrupt that cannot be delivered is moot."""
        if not self._accepting:
            return
        if self._translator.awaiting_result:
            self._translator.interrupt_requested = True
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._commands.put_nowait(_Command("interrupt", done))
        try:
            await asyncio.wait_for(asyncio.shield(done), INTERRUPT_TIMEOUT)
        except (TimeoutError, EngineError) as exc:
            logger.info("Claude engine interrupt: %s", exc or "timed out")

    async def close(self) -> None:
        """Stop taking turns, disconnect (the CLI gets stdin EOF), and wait for the owner task."""
        self._accepting = False
        task = self._task
        if task is not None and not task.done():
            self._commands.put_nowait(None)
            finished, _ = await asyncio.wait({task}, timeout=CLOSE_TIMEOUT)
            if not finished:
                logger.warning("the Claude engine did not close in %.0f s; cancelling it", CLOSE_TIMEOUT)
                task.cancel()
                await asyncio.wait({task}, timeout=5.0)
        self.closed.set()


async def _once(message: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    """``query()`` writes dict messages verbatim only from an async iterable."""
    yield message


def _settle(future: "asyncio.Future[None]", error: BaseException | None = None) -> None:
    if future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)
        future.exception()  # the sender may be gone; do not warn about an unretrieved error


def _block_id(message_id: str, text_index: int) -> str:
    """The wire id of a message's n-th text block. The CLI sends one ``assistant`` message per
    content block, all with the API message's id; giving later text blocks ids of their own
    keeps one transcript step per block (the sessions upsert steps by id)."""
    return message_id if text_index == 0 else f"{message_id}:{text_index}"


class _Translator:
    """SDK message objects -> engine wire dicts (see ``engines.base``), plus the little state
    that takes: the reported session id, the prompts awaiting a result, and stream bookkeeping."""

    def __init__(self) -> None:
        self.session_id: str | None = None
        self.interrupt_requested = False
        self._pending: list[str] = []  # uuids of prompts sent and not yet claimed by a result
        self._stream_message: dict[str | None, str] = {}  # parent_tool_use_id -> API message id
        self._stream_blocks: dict[tuple[str, int], str] = {}  # (message id, block index) -> wire id
        self._text_started: dict[str, int] = {}  # message id -> text blocks begun in the stream
        self._text_seen: dict[str, int] = {}  # message id -> text blocks seen in assistant messages

    def expect(self, prompt_uuid: str) -> None:
        self._pending.append(prompt_uuid)

    def forget(self, prompt_uuid: str) -> None:
        with contextlib.suppress(ValueError):
            self._pending.remove(prompt_uuid)

    @property
    def awaiting_result(self) -> bool:
        return bool(self._pending)

    def translate(self, message: object) -> list[dict[str, Any]]:
        if isinstance(message, StreamEvent):
            return self._stream_event(message)
        if isinstance(message, AssistantMessage):
            return self._assistant(message)
        if isinstance(message, UserMessage):
            return self._user(message)
        if isinstance(message, ResultMessage):
            return self._result(message)
        if isinstance(
            message, TaskStartedMessage | TaskProgressMessage | TaskNotificationMessage | TaskUpdatedMessage
        ):
            return [self._task(message)]
        if isinstance(message, SystemMessage):
            return self._system(message)
        if isinstance(message, RateLimitEvent):
            return [{"type": "rate_limit_event", **dataclasses.asdict(message)}]
        if isinstance(message, ConversationResetMessage):
            return [{"type": "conversation_reset", **dataclasses.asdict(message)}]
        # A message class this SDK version added after this code was written: surface it.
        raw = dataclasses.asdict(message) if dataclasses.is_dataclass(message) else {"repr": repr(message)}  # type: ignore[arg-type]  # an instance, never a class
        return [{**raw, "type": type(message).__name__}]

    # --- one per SDK message kind ---------------------------------------------------------

    def _system(self, message: SystemMessage) -> list[dict[str, Any]]:
        if message.subtype == "init":
            # Sent at the start of every turn; report only a change (a reset conversation).
            session_id = str(message.data.get("session_id") or "")
            if not session_id or session_id == self.session_id:
                return []
            self.session_id = session_id
            return [{"type": "system", "subtype": "init", "session_id": session_id}]
        if message.subtype.startswith("task_") and message.data.get("task_id"):
            return [
                {
                    "type": "task",
                    "task_id": str(message.data["task_id"]),
                    "status": message.subtype.removeprefix("task_"),
                    "description": str(message.data.get("description") or ""),
                }
            ]
        # status, compact_boundary, hook events, mirror errors, ...: the adapter surfaces them.
        return [{**message.data, "type": "system", "subtype": message.subtype}]

    def _task(
        self, message: TaskStartedMessage | TaskProgressMessage | TaskNotificationMessage | TaskUpdatedMessage
    ) -> dict[str, Any]:
        if isinstance(message, TaskStartedMessage):
            status, description = "started", message.description
        elif isinstance(message, TaskProgressMessage):
            status, description = "progress", message.description
        elif isinstance(message, TaskNotificationMessage):
            status, description = str(message.status), message.summary
        else:
            status = str(message.status or "updated")
            description = str(message.patch.get("description") or message.data.get("description") or "")
        return {
            "type": "task",
            "task_id": message.task_id,
            "status": status,
            "description": description or "",
        }

    def _stream_event(self, message: StreamEvent) -> list[dict[str, Any]]:
        """Only text deltas become wire ``stream_event``s; the other raw API events (block
        starts and stops, thinking and tool-input deltas) are bookkeeping or not for the UI."""
        event = message.event
        kind = event.get("type")
        key = message.parent_tool_use_id
        if kind == "message_start":
            self._stream_message[key] = str((event.get("message") or {}).get("id") or message.uuid)
            return []
        message_id = self._stream_message.get(key) or f"stream-{key or 'main'}"
        index = int(event.get("index") or 0)
        if kind == "content_block_start" and (event.get("content_block") or {}).get("type") == "text":
            n = self._text_started.get(message_id, 0)
            self._text_started[message_id] = n + 1
            self._stream_blocks[(message_id, index)] = _block_id(message_id, n)
            return []
        delta = event.get("delta") or {}
        if kind == "content_block_delta" and delta.get("type") == "text_delta" and delta.get("text"):
            wire_id = self._stream_blocks.get((message_id, index), message_id)
            return [{"type": "stream_event", "message_id": wire_id, "delta": str(delta["text"])}]
        return []

    def _assistant(self, message: AssistantMessage) -> list[dict[str, Any]]:
        """One wire message per content block, in order; thinking blocks are not surfaced."""
        message_id = message.message_id or message.uuid or f"assistant-{uuid.uuid4()}"
        out: list[dict[str, Any]] = []
        for block in message.content:
            if isinstance(block, TextBlock):
                n = self._text_seen.get(message_id, 0)
                self._text_seen[message_id] = n + 1
                if block.text:
                    content: list[dict[str, Any]] = [{"type": "text", "text": block.text}]
                    out.append(
                        {"type": "assistant", "message_id": _block_id(message_id, n), "content": content}
                    )
            elif isinstance(block, ToolUseBlock | ServerToolUseBlock):
                content = [{"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}]
                out.append({"type": "assistant", "message_id": message_id, "content": content})
            elif isinstance(block, ToolResultBlock | ServerToolResultBlock):
                out.append({"type": "user", "content": [_tool_result(block)]})
        if message.error and out:
            out[-1]["error"] = message.error
        return out

    def _user(self, message: UserMessage) -> list[dict[str, Any]]:
        """Tool results only. Other user messages are echoes of what was sent, or the CLI's own
        markers ("[Request interrupted by user]"); the pump writes user steps itself."""
        if isinstance(message.content, str):
            return []
        results = [_tool_result(b) for b in message.content if isinstance(b, ToolResultBlock)]
        return [{"type": "user", "content": results}] if results else []

    def _result(self, message: ResultMessage) -> list[dict[str, Any]]:
        ours = self.claim(message)
        self._stream_message.clear()
        self._stream_blocks.clear()
        self._text_started.clear()
        self._text_seen.clear()
        failed = message.is_error or message.subtype != "success"
        if message.terminal_reason in ABORTED_REASONS or (ours and self.interrupt_requested and failed):
            outcome, is_error = "interrupted", False
        elif failed:
            outcome, is_error = "error", True
        else:
            outcome, is_error = "success", False
        if ours:
            self.interrupt_requested = False
        text = message.result
        if outcome == "error" and not text:
            text = "; ".join(message.errors or []) or message.subtype
        return [
            {
                # A result that ends no prompt of ours (an injected turn, a stray empty result)
                # must not end our turn: it goes out under a type of its own, which the adapter
                # surfaces as unknown rather than dropping.
                "type": "result" if ours else "unclaimed_result",
                "subtype": outcome,
                "session_id": message.session_id,
                "is_error": is_error,
                "result": text,
                "num_turns": message.num_turns,
                "sdk_subtype": message.subtype,
                "terminal_reason": message.terminal_reason,
                "total_cost_usd": message.total_cost_usd,
            }
        ]

    def claim(self, message: ResultMessage) -> bool:
        """Is this result the end of a turn we asked for?

        Results are not one-to-one with our prompts: the CLI also runs turns it injects itself
        (a finished background task wakes the conversation, a scheduled prompt fires), and some
        CLI versions emit stray empty results with ``num_turns == 0``. ``num_turns == 0`` alone
        does not make a result foreign -- an interrupt before the model answered ends our turn
        with ``num_turns == 0`` too -- so:

        1. a result that lists the prompt uuids it took in (``user_message_uuid(s)``, CLI
           2.1.x) is ours exactly when it lists one of ours;
        2. one that lists none is ours when a prompt of ours is outstanding, its ``origin`` is
           unattributed or ``human`` (not an injected turn), and it is not the stray empty kind
           (``num_turns == 0``, no error, no text). A stray result can arrive just after we sent
           the next prompt, so without rule 2's last clause it would end that turn early.
        """
        taken = list(message.user_message_uuids or [])
        if message.user_message_uuid:
            taken.append(message.user_message_uuid)
        if taken:
            claimed = [u for u in self._pending if u in taken]
            self._pending = [u for u in self._pending if u not in taken]
            return bool(claimed)
        origin_kind = cast(dict[str, Any], message.origin or {}).get("kind")
        stray = message.num_turns == 0 and not message.is_error and not message.result
        if self._pending and origin_kind in (None, "human") and not stray:
            self._pending.pop(0)
            return True
        return False


def _tool_result(block: ToolResultBlock | ServerToolResultBlock) -> dict[str, Any]:
    if isinstance(block, ServerToolResultBlock):
        return {
            "type": "tool_result",
            "tool_use_id": block.tool_use_id,
            "content": str(block.content),
            "is_error": False,
        }
    return {
        "type": "tool_result",
        "tool_use_id": block.tool_use_id,
        "content": block.content,
        "is_error": bool(block.is_error),
    }
