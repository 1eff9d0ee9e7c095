"""A hooks-API app whose turns run a LangChain chain with Tether's callback handlers: a
``RunnableLambda`` that calls a ``@tool`` and a retriever, then a prompt, a fake chat model
that is part of langchain_core (it streams its answer word by word) and a parser, all inside
a ``@chat.step``. The message's first word picks the run: ``async`` (``astream`` with the
async handler), ``sync`` (``invoke`` on an app thread with the sync handler), ``blocking`` (``invoke``
on the event loop with the sync handler), ``everything`` (nothing hidden), ``forced`` (the
whole answer streamed into a message), ``fail`` (the tool raises, with the async handler),
``slow-async`` / ``slow-sync`` (a model that streams a long answer a word every 0.1 s, for a
stop in mid-run: ``astream`` with the async handler, ``stream`` on an app thread with the sync one),
``held-sync`` (a tool run on an app thread with the sync handler, the write of its step's start
held in the database until the turn is stopped: a step change in flight when the stop arrives),
``held-fail`` (the same, the hook failing instead of being stopped)."""

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForLLMRun,
    CallbackManagerForLLMRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.tools import tool

from sessions_app import chat
from sessions_app.chat.context import require_session
from sessions_app.chat.langchain import TurnOver
from tests.support.statements import holding_statements

ANSWER = "Final Answer: sunny in {city}"


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    if city == "Atlantis":
        raise ValueError("no weather under the sea")
    return f"sunny in {city}"


class Notes(BaseRetriever):
    """Notes about a city (a retriever over a fixed list)."""

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [Document(page_content=f"{query} has a river", metadata={"source": "atlas"})]


def gather(city: str) -> dict[str, str]:
    """What the model is told: the tool's and the retriever's answers."""
    notes = Notes().invoke(city)
    return {"city": city, "weather": weather.invoke({"city": city}), "notes": notes[0].page_content}


prompt = ChatPromptTemplate.from_messages(
    [("system", "Answer from the facts."), ("human", "{city}: {weather}; {notes}")]
)


def chain_for(city: str, *, streaming: bool = False) -> Runnable[str, str]:
    """A new chain per turn: the fake model answers from an iterator it uses up. With
    ``streaming`` the model streams in ``invoke`` too (as a model made with ``streaming=True``)."""
    model = GenericFakeChatModel(messages=iter([AIMessage(ANSWER.format(city=city))]))
    called: Runnable[Any, Any] = model.bind(stream=True) if streaming else model
    return RunnableLambda(gather) | prompt | called | StrOutputParser()


# A stop comes long before the end: 600 words, one every 0.1 s.
SLOW_ANSWER = "Final Answer: " + " ".join(f"w{n}" for n in range(600))
SLOW_PAUSE = 0.1


class SlowChatModel(BaseChatModel):
    """A chat model that streams ``SLOW_ANSWER`` a word per ``SLOW_PAUSE`` (sleeping between
    words, as a model waiting on its server would), in sync and async runs."""

    @property
    def _llm_type(self) -> str:
        return "slow-fake"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage(SLOW_ANSWER))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: Any = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        for word in SLOW_ANSWER.split(" "):
            time.sleep(SLOW_PAUSE)
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=word + " "))
            if run_manager is not None:
                run_manager.on_llm_new_token(word + " ", chunk=chunk)
            yield chunk

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: Any = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        for word in SLOW_ANSWER.split(" "):
            await asyncio.sleep(SLOW_PAUSE)
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=word + " "))
            if run_manager is not None:
                await run_manager.on_llm_new_token(word + " ", chunk=chunk)
            yield chunk


def slow_chain() -> Runnable[dict[str, Any], str]:
    return prompt | SlowChatModel() | StrOutputParser()


SLOW_INPUT = {"city": "Paris", "weather": "rain", "notes": "none"}


@chat.step(name="slow", type="run")
async def answer_slow_async() -> None:
    handler = chat.AsyncLangchainCallbackHandler(stream_final_answer=True)
    async for _ in slow_chain().astream(SLOW_INPUT, config={"callbacks": [handler]}):
        pass


@chat.step(name="slow", type="run")
async def answer_slow_sync() -> None:
    handler = chat.LangchainCallbackHandler(stream_final_answer=True)

    def run() -> None:
        for _ in slow_chain().stream(SLOW_INPUT, config={"callbacks": [handler]}):
            pass

    await chat.make_async(run)()


# ``held-sync`` / ``held-fail``: the tool whose step's first write is held, what the run step
# streams before the run, the token it streams once that write is held (the test stops the
# turn then, or the hook fails with ``HELD_FAILURE``), and how long after the turn's end the
# write is let go (the stop's cancel, or the failure, has reached the turn by then).
HELD_TOOL = "archive_lookup"
HELD_NOTE = "looking it up in the archive"
HELD_SIGNAL = " (held)"
HELD_FAILURE = "the archive is closed"
HELD_AFTER_END = 0.3
_left_running: set[asyncio.Future[None]] = set()


@chat.step(name="held", type="run")
async def answer_held_sync(city: str, *, fail: bool = False) -> None:
    session = require_session()
    loop = asyncio.get_running_loop()
    shown = chat.context.current_step
    assert shown is not None
    await shown.stream_token(HELD_NOTE)
    handler = chat.LangchainCallbackHandler()
    held = asyncio.Event()  # the tool's write is held (set from the app thread)
    failed = threading.Event()  # ``fail``: the hook has raised

    def turn_ended() -> bool:
        deadline = time.monotonic() + 10
        while not (session.stopping or failed.is_set()) and time.monotonic() < deadline:
            time.sleep(0.01)
        return session.stopping or failed.is_set()

    def run() -> None:
        with holding_statements(HELD_TOOL) as hold:

            @tool(HELD_TOOL)
            def lookup(city: str) -> str:
                """What the archive says of a city."""
                # Its step's start was handed to the loop: its write is held, the step unshown.
                if hold.held.wait(10):
                    chat.run_sync(shown.stream_token(HELD_SIGNAL))
                    loop.call_soon_threadsafe(held.set)
                if turn_ended():
                    time.sleep(HELD_AFTER_END)
                hold.release()
                return f"{city} was founded long ago"

            with contextlib.suppress(TurnOver):  # the turn's end ends the run at its next callback
                RunnableLambda(lambda c: lookup.invoke({"city": c})).invoke(
                    city, config={"callbacks": [handler]}
                )

    running = asyncio.ensure_future(chat.make_async(run)())
    _left_running.add(running)  # ``fail`` leaves it running: kept until it ends
    running.add_done_callback(_left_running.discard)
    if not fail:
        await running
        return
    await asyncio.wait_for(held.wait(), timeout=30)
    failed.set()
    raise RuntimeError(HELD_FAILURE)


@chat.step(name="answer", type="run")
async def answer_async(city: str) -> str:
    handler = chat.AsyncLangchainCallbackHandler(stream_final_answer=True)
    config = RunnableConfig(callbacks=[handler])
    text = "".join([chunk async for chunk in chain_for(city).astream(city, config=config)])
    if not handler.has_streamed_final_answer:
        await chat.Message(text).send()
    return text


@chat.step(name="answer", type="run")
async def answer_sync(city: str) -> str:
    handler = chat.LangchainCallbackHandler(stream_final_answer=True)

    def run() -> str:
        return "".join(chain_for(city).stream(city, config={"callbacks": [handler]}))

    text = await chat.make_async(run)()
    if not handler.has_streamed_final_answer:
        await chat.Message(text).send()
    return text


@chat.on_message
async def on_message(message: chat.Message) -> None:
    mode, _, city = message.content.partition(" ")
    runs: dict[str, Any] = {"async": answer_async, "sync": answer_sync}
    slow_runs: dict[str, Any] = {"slow-async": answer_slow_async, "slow-sync": answer_slow_sync}
    if mode in slow_runs:
        await slow_runs[mode]()
        await chat.Message("done slow").send()
        return
    if mode == "held-fail":  # fails while the tool's write is held: the turn ends in an error
        await answer_held_sync(city, fail=True)
    if mode == "held-sync":
        await answer_held_sync(city)
        await chat.Message("done held").send()
        return
    if mode == "fail":
        handler = chat.AsyncLangchainCallbackHandler()
        try:
            await chain_for(city).ainvoke(city, config={"callbacks": [handler]})
        except ValueError as error:
            await chat.Message(f"failed: {error}").send()
        return
    if mode == "everything":  # nothing hidden: the sequence, the prompt and the parser too
        handler = chat.AsyncLangchainCallbackHandler(to_ignore=[])
        await chain_for(city).ainvoke(city, config={"callbacks": [handler]})
        await chat.Message("done everything").send()
        return
    if mode == "forced":  # the whole answer streamed, as Chainlit's llama.cpp example asks
        forced = chat.LangchainCallbackHandler(stream_final_answer=True, answer_prefix_tokens=["Assistant"])
        forced.answer_reached = True
        await chat.make_async(chain_for(city, streaming=True).invoke)(city, config={"callbacks": [forced]})
        if forced.final_stream is not None:
            await forced.final_stream.update()
        return
    if mode == "blocking":  # a sync invoke on the event loop, as some of Chainlit's examples do
        on_loop = chat.LangchainCallbackHandler()
        text = chain_for(city).invoke(city, config={"callbacks": [on_loop]})
        await chat.Message(text).send()
        return
    await runs[mode](city)
    await chat.Message(f"done {mode}").send()
