"""An engine for any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, llama.cpp, Ollama...).

Chat completions are stateless: every request carries the whole conversation. So a run keeps
the history (system prompt, user and assistant turns) in memory and answers one turn at a time
from an ``asyncio.Queue``, streaming each reply as ``stream_event`` deltas, then the complete
``assistant`` message and a ``result`` (the wire format is in ``engines.base``).

The engine session id is a uuid the run makes up: the API keeps no conversation of its own to
resume. Tether's transcript is the durable record, so ``start(resume=ID)`` rebuilds the history
from it (the thread whose ``engine_session_id`` is ID) through a *history loader*; tests and other
callers can inject their own.

Box options: ``base_url`` (default: the ``openai`` package's, i.e. ``OPENAI_BASE_URL`` or
api.openai.com), ``api_key`` (default: ``OPENAI_API_KEY``, then a placeholder, since local
servers want none), ``model``, ``system_prompt``, ``temperature``, ``max_retries``, ``timeout``
and ``close_grace`` (seconds ``close()`` lets an in-flight turn finish).
"""

import asyncio
import contextlib
import logging
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, cast

import openai
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionMessageParam

from sessions_app.runtime.engines.base import EngineError, UserTurn
from sessions_app.runtime.engines.options import Option, at_least, http_url, not_blank, positive

logger = logging.getLogger(__name__)

HistoryLoader = Callable[[str], Awaitable[list[dict[str, Any]]]]

DEFAULT_MODEL = "gpt-4o-mini"
# Local servers (llama.cpp, vLLM, Ollama) ignore the key, but the client refuses to start without one.
PLACEHOLDER_API_KEY = "sk-no-key-required"
# Like the echo engine: close() lets the in-flight turn finish for this long, then cuts it.
CLOSE_GRACE = 5.0
ROLES = {"user_message": "user", "assistant_message": "assistant"}


def openai_content(blocks: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """Tether content blocks as a chat-completions ``content``.

    Text only becomes a plain string, which every OpenAI-compatible server accepts (several
    local ones reject content-part arrays); with images it becomes parts, each image an
    ``image_url`` part (base64 sources as ``data:`` URLs). Raises ``ValueError`` on an image
    whose source it cannot express.
    """
    if not any(block.get("type") == "image" for block in blocks):
        return "\n\n".join(block.get("text", "") for block in blocks if block.get("type") == "text")
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if block.get("type") == "text":
            parts.append({"type": "text", "text": block.get("text", "")})
        elif block.get("type") == "image":
            parts.append({"type": "image_url", "image_url": {"url": _image_url(block)}})
    return parts


def _image_url(block: dict[str, Any]) -> str:
    source = block.get("source") or {}
    if source.get("type") == "base64" and source.get("data"):
        return f"data:{source.get('media_type') or 'image/png'};base64,{source['data']}"
    if source.get("type") == "url" and source.get("url"):
        return str(source["url"])
    raise ValueError(f"cannot send an image with source type {source.get('type')!r}")


def messages_from_steps(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat-completions messages from transcript steps (``type``, ``output``, ``content``).

    User steps keep their images (their ``content`` holds the turn's blocks) so a resumed
    conversation can still refer to them; empty messages are left out.
    """
    history: list[dict[str, Any]] = []
    for step in steps:
        if step["type"] not in ROLES:
            continue
        content: str | list[dict[str, Any]] = step.get("output") or ""
        blocks = step.get("content")
        if step["type"] == "user_message" and isinstance(blocks, list) and blocks:
            with contextlib.suppress(ValueError, AttributeError):
                content = openai_content(blocks)
        if content:
            history.append({"role": ROLES[step["type"]], "content": content})
    return history


TranscriptReader = Callable[[str], Awaitable[list[dict[str, Any]]]]


def _from(transcript: TranscriptReader | None) -> HistoryLoader:
    """A history loader reading Tether's transcript (the conversation's durable record); with
    no transcript reader the engine starts every resumed conversation afresh."""

    async def load(engine_session_id: str) -> list[dict[str, Any]]:
        return messages_from_steps(await transcript(engine_session_id)) if transcript else []

    return load


class OpenAIEngine:
    """Builds runs against one OpenAI-compatible endpoint (a box's ``engine_options``)."""

    # ``history_loader`` is an argument, not an option: a box's options are JSON.
    OPTIONS = {
        "base_url": Option("string", check=http_url),
        "api_key": Option("string"),
        # Required here (the engine alone defaults to DEFAULT_MODEL): a local server's model
        # has another name, and an operator should see which model a box talks to.
        "model": Option("string", required=True, check=not_blank),
        "system_prompt": Option("string"),
        "temperature": Option("number", check=lambda v: None if 0 <= v <= 2 else "must be between 0 and 2"),
        "max_retries": Option("integer", check=at_least(0)),
        "timeout": Option("number", check=positive),
        "close_grace": Option("number", check=at_least(0)),
    }

    # The pool hands it the transcript of a conversation to resume (``runtime.transcript``).
    READS_TRANSCRIPT = True

    def __init__(
        self,
        options: dict[str, Any],
        *,
        history_loader: HistoryLoader | None = None,
        transcript: TranscriptReader | None = None,
    ) -> None:
        self.base_url: str | None = options.get("base_url") or None
        self.api_key: str = options.get("api_key") or os.environ.get("OPENAI_API_KEY") or PLACEHOLDER_API_KEY
        self.model: str = options.get("model") or DEFAULT_MODEL
        self.system_prompt: str = options.get("system_prompt") or ""
        temperature = options.get("temperature")
        self.temperature: float | None = None if temperature is None else float(temperature)
        self.max_retries: int = int(options.get("max_retries", openai.DEFAULT_MAX_RETRIES))
        timeout = options.get("timeout")
        self.timeout: float | None = None if timeout is None else float(timeout)
        self.close_grace: float = float(options.get("close_grace", CLOSE_GRACE))
        self.history_loader: HistoryLoader = (
            history_loader or options.get("history_loader") or _from(transcript)
        )

    async def rewind(self, conversation_id: str, turns_kept: int) -> None:
        """Nothing to forget here: a run rebuilds its history from Tether's transcript, which
        the edit has cut already (``base.Rewinds``)."""

    async def start(self, *, resume: str | None = None) -> "OpenAIRun":
        history: list[dict[str, Any]] = []
        if self.system_prompt:
            history.append({"role": "system", "content": self.system_prompt})
        if resume:
            try:
                history.extend(await self.history_loader(resume))
            except Exception as exc:
                raise EngineError(f"could not load the history of conversation {resume}: {exc}") from exc
        client_options: dict[str, Any] = {"api_key": self.api_key, "max_retries": self.max_retries}
        if self.base_url:
            client_options["base_url"] = self.base_url
        if self.timeout is not None:
            client_options["timeout"] = self.timeout
        try:
            client = AsyncOpenAI(**client_options)
        except openai.OpenAIError as exc:
            raise EngineError(f"could not configure the OpenAI client: {exc}") from exc
        request: dict[str, Any] = {"model": self.model}
        if self.temperature is not None:
            request["temperature"] = self.temperature
        return OpenAIRun(
            client,
            session_id=resume or str(uuid.uuid4()),
            history=history,
            request=request,
            close_grace=self.close_grace,
        )


class OpenAIRun:
    """One conversation: an in-memory history and a worker task answering queued turns in order.

    Every engine message goes through an outbox queue that ``messages()`` drains, so the worker
    never waits on the consumer and the ``system/init`` message is first. ``None`` in the outbox
    ends ``messages()``; it is put there once, when the run shuts down.
    """

    def __init__(
        self,
        client: AsyncOpenAI,
        *,
        session_id: str,
        history: list[dict[str, Any]],
        request: dict[str, Any],
        close_grace: float = CLOSE_GRACE,
    ) -> None:
        self.client = client
        self.session_id = session_id
        self.history = history
        self.request = request
        self.close_grace = close_grace
        self.closed = asyncio.Event()
        self._turns: asyncio.Queue[UserTurn | None] = asyncio.Queue()
        self._outbox: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._current: asyncio.Task[None] | None = None
        self._closing = False
        self._shut_down = False
        self._close_task: asyncio.Task[None] | None = None
        self._emit({"type": "system", "subtype": "init", "session_id": session_id})
        self._worker = asyncio.create_task(self._work())

    # --- the Run protocol ---------------------------------------------------------------------

    async def send(self, turn: UserTurn) -> None:
        if self._closing or self.closed.is_set():
            raise EngineError("the OpenAI run is closed")
        self._turns.put_nowait(turn)

    async def messages(self) -> AsyncIterator[dict[str, Any]]:
        while (message := await self._outbox.get()) is not None:
            yield message
        self._outbox.put_nowait(None)  # a second reader ends too instead of hanging

    async def interrupt(self) -> None:
        """Cancel the in-flight request (dropping its HTTP stream); the worker then reports an
        ``interrupted`` result. With no turn in flight this is a no-op, like the echo engine."""
        task = self._current
        if task is None or task.done():
            return
        task.cancel()
        await asyncio.wait({task})

    async def close(self) -> None:
        """Take no more turns, let the ones already sent finish for up to ``close_grace``
        seconds (a restart mid-turn then still gets its result), cut the rest, and end.

        Idempotent, and shielded: a caller cancelled while waiting does not leave the run
        half-closed."""
        if self._close_task is None:
            self._close_task = asyncio.create_task(self._close())
        await asyncio.shield(self._close_task)

    async def _close(self) -> None:
        self._closing = True
        self._turns.put_nowait(None)
        await asyncio.wait({self._worker}, timeout=self.close_grace)
        if not self._worker.done():
            logger.info("OpenAI run %s: cutting the turn in flight at close", self.session_id)
            if self._current is not None:
                self._current.cancel()
            self._worker.cancel()
            await asyncio.wait({self._worker})
        await self._shutdown()

    # --- the worker ---------------------------------------------------------------------------

    def _emit(self, message: dict[str, Any]) -> None:
        self._outbox.put_nowait(message)

    def _result(self, subtype: str, text: str | None, *, is_error: bool = False) -> None:
        self._emit(
            {
                "type": "result",
                "subtype": subtype,
                "session_id": self.session_id,
                "is_error": is_error,
                "result": text,
                "num_turns": 1,
            }
        )

    async def _work(self) -> None:
        try:
            while (turn := await self._turns.get()) is not None:
                await self._take(turn)
        except Exception:
            # _answer reports its own failures; anything else is a bug that must not leave
            # the run open and silent, so the run ends and the session sees it close.
            logger.exception("OpenAI run %s failed", self.session_id)
            self._closing = True
            await self._shutdown()

    async def _take(self, turn: UserTurn) -> None:
        """Answer one turn in a task of its own, so ``interrupt()`` can cancel the request
        without cancelling the worker."""
        task = asyncio.create_task(self._answer(turn))
        self._current = task
        try:
            await asyncio.wait({task})
        finally:
            self._current = None
        if task.cancelled():
            self._result("interrupted", None)

    async def _answer(self, turn: UserTurn) -> None:
        message_id = str(uuid.uuid4())
        try:
            user_message = {"role": "user", "content": openai_content(turn.content_blocks())}
        except ValueError as exc:
            self._result("error", str(exc), is_error=True)
            return
        # An interrupted turn stays in the history (Tether's transcript has its user step too);
        # its partial reply does not (no assistant step is written for it either).
        self.history.append(user_message)
        parts: list[str] = []
        try:
            stream = await self.client.chat.completions.create(
                messages=cast(
                    "list[ChatCompletionMessageParam]", list(self.history)
                ),  # a copy: built while we await
                stream=True,
                **self.request,
            )
            async with stream:
                async for chunk in stream:
                    for choice in chunk.choices or []:
                        delta = getattr(getattr(choice, "delta", None), "content", None)
                        if delta:
                            parts.append(delta)
                            self._emit({"type": "stream_event", "message_id": message_id, "delta": delta})
        except Exception as exc:
            if not isinstance(exc, openai.OpenAIError):
                logger.exception("OpenAI run %s: unexpected failure in a turn", self.session_id)
            # A rejected request (a bad image, a context overflow) would fail every later turn
            # if it stayed in the history, so the failed turn leaves it; the user can resend.
            if self.history and self.history[-1] is user_message:
                self.history.pop()
            self._result("error", str(exc) or type(exc).__name__, is_error=True)
            return
        text = "".join(parts)
        self.history.append({"role": "assistant", "content": text})
        if text:
            self._emit(
                {"type": "assistant", "message_id": message_id, "content": [{"type": "text", "text": text}]}
            )
        self._result("success", text)

    async def _shutdown(self) -> None:
        if self._shut_down:
            return
        self._shut_down = True
        try:
            await self.client.close()
        except Exception:
            logger.warning("OpenAI run %s: closing the HTTP client failed", self.session_id, exc_info=True)
        self._outbox.put_nowait(None)
        self.closed.set()
