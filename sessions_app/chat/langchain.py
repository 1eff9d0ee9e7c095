"""``chat.LangchainCallbackHandler`` / ``chat.AsyncLangchainCallbackHandler``: LangChain runs
(chains, model calls, tools, retrievers) shown as nested steps of the turn, as Chainlit's are.

Pass one in a runnable's ``config={"callbacks": [...]}``. Each run LangChain reports becomes a
``chat.Step`` whose parent is the step of its parent run; the outermost runs nest where a step
opened where the handler was made would (under ``@chat.step``, or the user's message). A chain
is a ``run`` step, a model call an ``llm`` step (the prompt as input, the generation as output,
its tokens streamed into it), a tool a ``tool`` step and a retriever a ``retrieval`` step.
Runs that only glue others together (``to_ignore``: sequences, lambdas, ...) are not shown;
what they ran nests under the nearest shown run.

With ``stream_final_answer``, the tokens a model writes after ``answer_prefix_tokens`` (by
default ``Final Answer:``, matched with whitespace ignored) also stream into a new message,
``handler.final_stream``, which is sent when that model call ends.

The sync handler is for runs on a thread (``chat.make_async(chain.invoke)``, or the threads
LangChain calls a sync handler on in an async run): it hands every step change to the chat's
event loop in order, and waits for them all when its outermost run ends, so what the app
sends next comes after the steps. The async handler is for async runs: it writes on the loop
itself, and waits for each change from the sync parts of such a run (a plain function in a
``RunnableLambda`` that calls a tool), which LangChain drives on a loop of its own.

A stop ends the run with the turn: the hook is cancelled (an async run with it), its open
steps are kept as far as they got, marked interrupted, and closed (``LiveSession``) once the
step changes already running on the loop have landed (``LiveSession.add_turn_work``), as a
failed hook's are. A sync run on an app thread goes on after the hook is gone, so once its
turn is over (stopped, failed or ended) the handler hands nothing more to the loop and raises
``TurnOver`` into the run (LangChain re-raises a handler's error when its ``raise_error`` is
true, as the handler's is from then on), which ends it at its next callback: nothing of it
shows after the stop, nor in the next turn.

A run that holds the chat's loop (a sync ``invoke`` made on it, or the async handler given a
sync run) could only have its steps written after the reply, and after the turn, when they
are refused: it is not recorded, and the log says so once.

This module needs the optional ``langchain-core`` package; ``sessions_app.chat`` imports it
only when one of the handlers is first used.
"""

import asyncio
import concurrent.futures
import contextvars
import json
import logging
import threading
import uuid
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

try:
    from langchain_core.callbacks import AsyncCallbackHandler, BaseCallbackHandler
    from langchain_core.documents import Document
    from langchain_core.messages import BaseMessage
    from langchain_core.outputs import LLMResult
    from pydantic import BaseModel
except ImportError as missing:  # pragma: no cover - exercised without the optional package
    raise ImportError(
        "chat.LangchainCallbackHandler needs the optional package langchain-core "
        "(pip install langchain-core; requirements.txt pins the version Tether is tested with)"
    ) from missing

from sessions_app.chat.context import require_session
from sessions_app.chat.message import Message
from sessions_app.chat.step import Step, StepType
from sessions_app.chat.sync import hook_loop

if TYPE_CHECKING:
    from sessions_app.live import LiveSession

# A step change waiting to run on the chat's event loop.
Change = Coroutine[Any, Any, object]

logger = logging.getLogger(__name__)

DEFAULT_ANSWER_PREFIX_TOKENS = ("Final", "Answer", ":")
# Runs that only compose others: hidden, their children nest under the nearest shown run.
DEFAULT_TO_IGNORE = ("RunnableSequence", "RunnableParallel", "RunnableAssign", "RunnableLambda", "<lambda>")
# Kinds of run shown even when the run that started them is hidden.
DEFAULT_TO_KEEP = ("retriever", "llm", "agent", "chain", "tool")

# LangChain's run types as Tether step types; prompts and parsers have no step type of their own.
STEP_TYPE_OF_RUN: dict[str, StepType] = {
    "chain": "run",
    "agent": "run",
    "llm": "llm",
    "tool": "tool",
    "retriever": "retrieval",
    "embedding": "embedding",
}


def plain(value: Any) -> Any:
    """A run's inputs or outputs as JSON-able data: messages as role and content, documents
    as their text and metadata, pydantic models as their fields."""
    if isinstance(value, BaseMessage):
        shown: dict[str, Any] = {"role": value.type, "content": plain(value.content)}
        if tool_calls := getattr(value, "tool_calls", None):
            shown["tool_calls"] = plain(tool_calls)
        return shown
    if isinstance(value, Document):
        return {"page_content": value.page_content, "metadata": plain(value.metadata)}
    if isinstance(value, BaseModel):
        return plain(value.model_dump())
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [plain(item) for item in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def _show_input(value: Any) -> str:
    """How the client renders a step's input (Chainlit's ``showInput``)."""
    return "text" if isinstance(value, str) else "json"


class AnswerWatch:
    """Finds where the final answer starts in a model's tokens: after the prefix tokens,
    compared with all whitespace removed (models split ``Final Answer:`` in many ways)."""

    def __init__(self, prefix_tokens: Sequence[str], *, reached: bool) -> None:
        self.prefix = "".join("".join(token.split()) for token in prefix_tokens)
        self.reached = reached or not self.prefix
        self._seen = ""
        # Right after the prefix: the whitespace before the answer's first word is not kept.
        self._leading = False

    def after_prefix(self, token: str) -> str:
        """The part of ``token`` that belongs to the answer ("" before the prefix is seen)."""
        if not self.reached:
            token = self._past_prefix(token)
        if self._leading:
            token = token.lstrip()
            self._leading = not token
        return token

    def _past_prefix(self, token: str) -> str:
        for cut in range(len(token) + 1):
            # Whitespace-free text seen so far, up to ``cut`` characters of this token.
            if (self._seen + "".join(token[:cut].split())).endswith(self.prefix):
                self.reached = self._leading = True
                return token[cut:]
        self._seen = (self._seen + "".join(token.split()))[-len(self.prefix) :]
        return ""


@dataclass
class Run:
    """A LangChain run the handler saw: its step (None when hidden or not recorded) and its
    parent run."""

    step: Step | None
    parent: uuid.UUID | None
    kind: str
    answer: AnswerWatch | None = None
    # False: run where its steps could not be written in turn (see ``StepRecorder.start``).
    recorded: bool = True


_said_unrecorded = threading.Event()


def _say_unrecorded(handler: str) -> None:
    """Log once per process that a run is not recorded, and what to do instead."""
    if not _said_unrecorded.is_set():
        _said_unrecorded.set()
        logger.warning(
            "%s: a LangChain run held the chat's event loop (a sync run on the loop, or the "
            "async handler in a sync run), so its steps are not shown; run it with "
            "chat.make_async(chain.invoke) and chat.LangchainCallbackHandler, or "
            "await chain.ainvoke with chat.AsyncLangchainCallbackHandler",
            handler,
        )


class TurnOver(Exception):
    """Raised into a sync LangChain run whose turn is over (stopped, or the hook returned):
    it ends the run, whose steps could no longer be shown."""


class StepRecorder:
    """What both handlers share: the runs seen, their steps, and the ordered hand-over of
    step changes to the chat's event loop."""

    def __init__(
        self,
        *,
        answer_prefix_tokens: Sequence[str] | None,
        stream_final_answer: bool,
        force_stream_final_answer: bool,
        to_ignore: Sequence[str] | None,
        to_keep: Sequence[str] | None,
    ) -> None:
        # Made inside a hook: its steps belong to that hook's session.
        self.session: LiveSession = require_session()
        self.loop = hook_loop()
        # Where the handler was made: the outermost runs nest as a step opened there would.
        self.context = contextvars.copy_context()
        self.answer_prefix_tokens = list(
            DEFAULT_ANSWER_PREFIX_TOKENS if answer_prefix_tokens is None else answer_prefix_tokens
        )
        self.stream_final_answer = stream_final_answer
        self.answer_reached = force_stream_final_answer
        self.to_ignore = list(DEFAULT_TO_IGNORE if to_ignore is None else to_ignore)
        self.to_keep = list(DEFAULT_TO_KEEP if to_keep is None else to_keep)
        self.final_stream: Message | None = None
        self.has_streamed_final_answer = False
        self.runs: dict[uuid.UUID, Run] = {}
        self._tail: asyncio.Future[None] | None = None
        # The hook task (the turn) the latest outermost run started in.
        self._turn: asyncio.Task[Any] | None = None

    def on_loop(self) -> bool:
        """Called on the chat's event loop (from a coroutine, or from plain code that holds it)."""
        try:
            return asyncio.get_running_loop() is self.loop
        except RuntimeError:
            return False

    def turn_over(self) -> bool:
        """The turn the current run belongs to was stopped, failed or has ended: its changes
        are late (a failed turn's are while it closes its steps, ``LiveSession.closing``)."""
        turn = self._turn
        return turn is not None and (turn.done() or turn.cancelling() > 0 or self.session.closing(turn))

    # --- handing step changes over from other threads, in order ---------------------------

    async def _enqueue(self, change: Change) -> None:
        """On the loop: run ``change`` after every change handed over before it."""
        previous = self._tail

        async def after() -> None:
            if previous is not None:
                await asyncio.wait([previous])  # its failure is logged by the session
            if self.turn_over():  # stopped while the change waited for the loop
                change.close()
                return
            await change

        task = self.loop.create_task(after(), context=self.context.copy())
        # A stop lets it land before the turn's steps are closed (``LiveSession.add_turn_work``).
        self.session.add_turn_work(task)
        self._tail = task
        await task

    def submit(self, change: Change, *, wait: bool) -> None:
        """From another thread: hand the change to the loop; with ``wait``, wait until it and
        every change handed over before it are done."""
        handed: concurrent.futures.Future[None] = asyncio.run_coroutine_threadsafe(
            self._enqueue(change), self.loop
        )
        if wait:
            handed.result()

    # --- runs to steps --------------------------------------------------------------------

    def _hidden(self, name: str, kind: str, parent: uuid.UUID | None) -> bool:
        by_name = any(pattern in name for pattern in self.to_ignore)
        parent_hidden = parent in self.runs and self.runs[parent].step is None
        return by_name or (parent_hidden and kind not in self.to_keep)

    def _shown_parent(self, parent: uuid.UUID | None) -> Step | None:
        """The step of the nearest shown run above (None: the outermost level)."""
        while parent is not None and parent in self.runs:
            run = self.runs[parent]
            if run.step is not None:
                return run.step
            parent = run.parent
        return None

    def start(
        self,
        run_id: uuid.UUID,
        parent_run_id: uuid.UUID | None,
        *,
        name: str,
        kind: str,
        inputs: Any,
        tags: list[str] | None,
        recordable: bool,
        handler: str,
    ) -> Change | None:
        """Note a run that starts; the change that shows its step (None: hidden). A run is
        not recorded where its steps could only be written after the code that follows it
        (``recordable`` False: it holds the chat's loop), nor is anything it runs."""
        parent = self.runs.get(parent_run_id) if parent_run_id is not None else None
        if parent_run_id is None:
            self._turn = self.session.current_task
        if not recordable or (parent is not None and not parent.recorded):
            _say_unrecorded(handler)
            self.runs[run_id] = Run(None, parent_run_id, kind, recorded=False)
            return None
        if self._hidden(name, kind, parent_run_id):
            self.runs[run_id] = Run(None, parent_run_id, kind)
            return None
        step = Step(name, STEP_TYPE_OF_RUN.get(kind, "undefined"), id=run_id, show_input=_show_input(inputs))
        step.input = plain(inputs)
        if tags:
            step.metadata["tags"] = list(tags)
        shown_parent = self._shown_parent(parent_run_id)
        if shown_parent is not None:
            step.parent_id = shown_parent.id
        else:
            self.context.copy().run(step.take_parent)
        run = Run(step, parent_run_id, kind)
        if kind == "llm" and self.stream_final_answer:
            run.answer = AnswerWatch(self.answer_prefix_tokens, reached=self.answer_reached)
        self.runs[run_id] = run
        return step.show_running()

    def token(self, run_id: uuid.UUID, token: Any) -> Change | None:
        """The change that streams a model's token into its step (and the final answer)."""
        run = self.runs.get(run_id)
        text = "".join(map(str, token)) if isinstance(token, list) else str(token)
        if run is None or run.step is None or not text:
            return None
        answer = run.answer.after_prefix(text) if run.answer is not None else ""
        if answer:
            self.answer_reached = True
            self.has_streamed_final_answer = True
            if self.final_stream is None:
                self.final_stream = Message()
        return self._stream(run.step, text, answer)

    async def _stream(self, step: Step, text: str, answer: str) -> None:
        await step.stream_token(text)
        if answer and self.final_stream is not None:
            await self.final_stream.stream_token(answer)

    def end(self, run_id: uuid.UUID, outputs: Any, inputs: Any = None) -> Change | None:
        """The change that finishes a run's step with its outputs (and its inputs, when a
        streamed run learnt them only as it ran)."""
        run = self.runs.get(run_id)
        if run is None or run.step is None:
            return None
        streamed_answer = run.answer is not None and run.answer.reached and self.final_stream is not None
        return self._finish(run.step, plain(outputs), inputs, self.final_stream if streamed_answer else None)

    async def _finish(self, step: Step, output: Any, inputs: Any, answer: Message | None) -> None:
        # Set here, in turn: the tokens handed over before it have been added by now.
        step.output = output
        if inputs is not None:
            step.input = plain(inputs)
            step.show_input = _show_input(inputs)
        await step.finish()
        if answer is not None and answer.streaming:
            await answer.send()

    def error(self, run_id: uuid.UUID, error: BaseException) -> Change | None:
        """The change that finishes a run's step as failed; None for a stop (a cancelled
        hook): the session keeps the open step as far as it got, marked interrupted."""
        run = self.runs.get(run_id)
        if run is None or run.step is None or not isinstance(error, Exception):
            return None
        return self._fail(run.step, f"{type(error).__name__}: {error}")

    @staticmethod
    async def _fail(step: Step, failure: str) -> None:
        step.is_error = True
        step.output = failure
        await step.finish()

    def recorded(self, run_id: uuid.UUID | None) -> bool:
        """``run_id`` is a run this handler saw and records."""
        run = self.runs.get(run_id) if run_id is not None else None
        return run is not None and run.recorded

    def is_outermost(self, run_id: uuid.UUID) -> bool:
        """An outermost run that is recorded (hidden or shown)."""
        run = self.runs.get(run_id)
        return run is not None and run.parent is None and run.recorded


def _name(serialized: dict[str, Any] | None, kwargs: dict[str, Any], fallback: str) -> str:
    """A run's name: the one LangChain gives, else its class's."""
    if name := kwargs.get("name"):
        return str(name)
    serialized = serialized or {}
    if name := serialized.get("name"):
        return str(name)
    ids = serialized.get("id")
    return str(ids[-1]) if isinstance(ids, list) and ids else fallback


def _prompt(messages: list[list[BaseMessage]]) -> list[Any]:
    """A chat model's prompt: the messages of its first (usually only) conversation."""
    return cast(list[Any], plain(messages[0] if messages else []))


def _generation(response: LLMResult) -> Any:
    """What a model answered: the text of its first generation, with any tool calls."""
    if not response.generations or not response.generations[0]:
        return ""
    generation = response.generations[0][0]
    message = getattr(generation, "message", None)
    if isinstance(message, BaseMessage) and getattr(message, "tool_calls", None):
        return plain(message)
    return generation.text


def _tool_input(input_str: str, inputs: dict[str, Any] | None) -> Any:
    if inputs is not None:
        return inputs
    try:
        return json.loads(input_str)
    except ValueError:
        return input_str


class ChainlitHandlerOptions:
    """Chainlit's constructor and the attributes apps read or set (``cb.answer_reached =
    True``, ``cb.final_stream``), shared by both handlers. Other keyword arguments (a
    LangChain tracer's) are accepted and ignored."""

    def __init__(
        self,
        answer_prefix_tokens: list[str] | None = None,
        stream_final_answer: bool = False,
        force_stream_final_answer: bool = False,
        to_ignore: list[str] | None = None,
        to_keep: list[str] | None = None,
        **_chainlit_only: Any,
    ) -> None:
        self.recorder = StepRecorder(
            answer_prefix_tokens=answer_prefix_tokens,
            stream_final_answer=stream_final_answer,
            force_stream_final_answer=force_stream_final_answer,
            to_ignore=to_ignore,
            to_keep=to_keep,
        )

    @property
    def answer_reached(self) -> bool:
        return self.recorder.answer_reached

    @answer_reached.setter
    def answer_reached(self, value: bool) -> None:
        self.recorder.answer_reached = value

    @property
    def final_stream(self) -> Message | None:
        return self.recorder.final_stream

    @property
    def has_streamed_final_answer(self) -> bool:
        return self.recorder.has_streamed_final_answer


class LangchainCallbackHandler(ChainlitHandlerOptions, BaseCallbackHandler):
    """LangChain runs as nested steps, for sync runs (``invoke``, ``stream`` on an app thread,
    e.g. through ``chat.make_async``). Make it inside a hook: it belongs to that session."""

    @property
    def raise_error(self) -> bool:  # type: ignore[override]
        """LangChain re-raises this handler's errors once its turn is over (``TurnOver``)."""
        return self.recorder.turn_over()

    def _hand(self, change: Change | None, *, wait: bool = False) -> None:
        if self.recorder.turn_over():
            if change is not None:
                change.close()
            raise TurnOver("the chat turn of this LangChain run was stopped or has ended")
        if change is not None:
            self.recorder.submit(change, wait=wait)
        elif wait:
            self.recorder.submit(_nothing(), wait=True)

    def _started(self, run_id: uuid.UUID, parent: uuid.UUID | None, **run: Any) -> None:
        # On the loop's own thread the loop waits for this run: nothing could be written now.
        recordable = not self.recorder.on_loop()
        self._hand(
            self.recorder.start(run_id, parent, recordable=recordable, handler=type(self).__name__, **run)
        )

    def _ended(self, run_id: uuid.UUID, change: Change | None) -> None:
        self._hand(change, wait=self.recorder.is_outermost(run_id))

    def _failed(self, run_id: uuid.UUID, error: BaseException) -> None:
        if not self.recorder.turn_over():  # else the run is failing of the TurnOver raised into it
            self._ended(run_id, self.recorder.error(run_id, error))

    def on_chain_start(
        self,
        serialized: dict[str, Any],
        inputs: dict[str, Any],
        *,
        run_id: uuid.UUID,
        parent_run_id: uuid.UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        kind = str(kwargs.get("run_type") or "chain")
        self._started(
            run_id,
            parent_run_id,
            name=_name(serialized, kwargs, "chain"),
            kind=kind,
            inputs=inputs,
            tags=tags,
        )

    def on_chain_end(self, outputs: Any, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        self._ended(run_id, self.recorder.end(run_id, outputs, kwargs.get("inputs")))

    def on_chain_error(self, error: BaseException, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        self._failed(run_id, error)

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: uuid.UUID,
        parent_run_id: uuid.UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._started(
            run_id,
            parent_run_id,
            name=_name(serialized, kwargs, "chat model"),
            kind="llm",
            inputs=_prompt(messages),
            tags=tags,
        )

    def on_llm_start(
        self,
        serialized: dict[str, Any],
        prompts: list[str],
        *,
        run_id: uuid.UUID,
        parent_run_id: uuid.UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        prompt = prompts[0] if len(prompts) == 1 else prompts
        self._started(
            run_id, parent_run_id, name=_name(serialized, kwargs, "llm"), kind="llm", inputs=prompt, tags=tags
        )

    def on_llm_new_token(self, token: Any, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        self._hand(self.recorder.token(run_id, token))

    def on_llm_end(self, response: LLMResult, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        self._ended(run_id, self.recorder.end(run_id, _generation(response)))

    def on_llm_error(self, error: BaseException, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        self._failed(run_id, error)

    def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: uuid.UUID,
        parent_run_id: uuid.UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._started(
            run_id,
            parent_run_id,
            name=_name(serialized, kwargs, "tool"),
            kind="tool",
            inputs=_tool_input(input_str, inputs),
            tags=tags,
        )

    def on_tool_end(self, output: Any, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        self._ended(run_id, self.recorder.end(run_id, output))

    def on_tool_error(self, error: BaseException, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        self._failed(run_id, error)

    def on_retriever_start(
        self,
        serialized: dict[str, Any],
        query: str,
        *,
        run_id: uuid.UUID,
        parent_run_id: uuid.UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._started(
            run_id,
            parent_run_id,
            name=_name(serialized, kwargs, "retriever"),
            kind="retriever",
            inputs=query,
            tags=tags,
        )

    def on_retriever_end(self, documents: Sequence[Document], *, run_id: uuid.UUID, **kwargs: Any) -> None:
        self._ended(run_id, self.recorder.end(run_id, list(documents)))

    def on_retriever_error(self, error: BaseException, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        self._failed(run_id, error)


async def _nothing() -> None:
    """A change that changes nothing: waiting for it waits for those handed over before."""


class AsyncLangchainCallbackHandler(ChainlitHandlerOptions, AsyncCallbackHandler):
    """LangChain runs as nested steps, for async runs (``ainvoke``, ``astream``). Make it
    inside a hook: it belongs to that session."""

    async def _apply(self, change: Change | None) -> None:
        if change is None:
            return
        if self.recorder.turn_over():  # a late part of a stopped run: shown nowhere
            change.close()
            return
        if self.recorder.on_loop():
            await change  # in the caller's task: a stop of the hook stops it too
        else:  # a sync part of a recorded run, on LangChain's loop: the chat's loop is free
            self.recorder.submit(change, wait=True)

    async def _started(self, run_id: uuid.UUID, parent: uuid.UUID | None, **run: Any) -> None:
        # On a loop of LangChain's own, a sync run inside a recorded (async) run: the chat's
        # loop awaits it, so its changes can be waited for; any other sync run may be
        # holding the chat's loop.
        recordable = self.recorder.on_loop() or self.recorder.recorded(parent)
        await self._apply(
            self.recorder.start(run_id, parent, recordable=recordable, handler=type(self).__name__, **run)
        )

    async def on_chain_start(
        self,
        serialized: dict[str, Any],
        inputs: dict[str, Any],
        *,
        run_id: uuid.UUID,
        parent_run_id: uuid.UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        kind = str(kwargs.get("run_type") or "chain")
        await self._started(
            run_id,
            parent_run_id,
            name=_name(serialized, kwargs, "chain"),
            kind=kind,
            inputs=inputs,
            tags=tags,
        )

    async def on_chain_end(self, outputs: Any, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        await self._apply(self.recorder.end(run_id, outputs, kwargs.get("inputs")))

    async def on_chain_error(self, error: BaseException, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        await self._apply(self.recorder.error(run_id, error))

    async def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: uuid.UUID,
        parent_run_id: uuid.UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        await self._started(
            run_id,
            parent_run_id,
            name=_name(serialized, kwargs, "chat model"),
            kind="llm",
            inputs=_prompt(messages),
            tags=tags,
        )

    async def on_llm_start(
        self,
        serialized: dict[str, Any],
        prompts: list[str],
        *,
        run_id: uuid.UUID,
        parent_run_id: uuid.UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        prompt = prompts[0] if len(prompts) == 1 else prompts
        await self._started(
            run_id, parent_run_id, name=_name(serialized, kwargs, "llm"), kind="llm", inputs=prompt, tags=tags
        )

    async def on_llm_new_token(self, token: Any, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        await self._apply(self.recorder.token(run_id, token))

    async def on_llm_end(self, response: LLMResult, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        await self._apply(self.recorder.end(run_id, _generation(response)))

    async def on_llm_error(self, error: BaseException, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        await self._apply(self.recorder.error(run_id, error))

    async def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: uuid.UUID,
        parent_run_id: uuid.UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        await self._started(
            run_id,
            parent_run_id,
            name=_name(serialized, kwargs, "tool"),
            kind="tool",
            inputs=_tool_input(input_str, inputs),
            tags=tags,
        )

    async def on_tool_end(self, output: Any, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        await self._apply(self.recorder.end(run_id, output))

    async def on_tool_error(self, error: BaseException, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        await self._apply(self.recorder.error(run_id, error))

    async def on_retriever_start(
        self,
        serialized: dict[str, Any],
        query: str,
        *,
        run_id: uuid.UUID,
        parent_run_id: uuid.UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        await self._started(
            run_id,
            parent_run_id,
            name=_name(serialized, kwargs, "retriever"),
            kind="retriever",
            inputs=query,
            tags=tags,
        )

    async def on_retriever_end(
        self, documents: Sequence[Document], *, run_id: uuid.UUID, **kwargs: Any
    ) -> None:
        await self._apply(self.recorder.end(run_id, list(documents)))

    async def on_retriever_error(self, error: BaseException, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        await self._apply(self.recorder.error(run_id, error))
