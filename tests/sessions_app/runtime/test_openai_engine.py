"""The OpenAI-compatible engine, through the real ``openai`` client, against a local server.

``FakeChatCompletions`` is an aiohttp app speaking the chat-completions streaming format
(``text/event-stream`` of ``chat.completion.chunk`` objects, then ``[DONE]``) and recording
every request body. It answers ``You said: <last user text>``; directives in that text change
its behaviour: ``!500`` fails the request, ``!slow N`` streams N tokens slowly.
"""

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.utils import timezone

from sessions_app.runtime import transcript
from sessions_app.runtime.engines import get_engine
from sessions_app.runtime.engines.base import EngineError, UserTurn
from sessions_app.runtime.engines.openai_engine import PLACEHOLDER_API_KEY, OpenAIEngine, OpenAIRun
from tests.support.fake_openai import FakeChatCompletions
from threads_app.models import Step, Thread
from threads_app.services import ensure_thread

SLOW_TOKEN_DELAY = 0.05
WAIT = 5.0
PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


StartRun = Callable[..., Awaitable[tuple[OpenAIRun, AsyncIterator[dict[str, Any]]]]]


@pytest.fixture
async def start() -> AsyncIterator[StartRun]:
    """Start a run and its message iterator; every run still open is closed afterwards."""
    runs: list[OpenAIRun] = []

    async def start_run(
        engine: OpenAIEngine, resume: str | None = None
    ) -> tuple[OpenAIRun, AsyncIterator[dict[str, Any]]]:
        run = await engine.start(resume=resume)
        runs.append(run)
        return run, aiter(run.messages())

    yield start_run
    for run in runs:
        if not run.closed.is_set():
            await asyncio.wait_for(run.close(), WAIT)


def engine_for(fake: FakeChatCompletions, **options: Any) -> OpenAIEngine:
    base = {"base_url": fake.url, "api_key": "test-key", "model": "test-model", "max_retries": 0}
    return OpenAIEngine({**base, **options})


async def next_message(messages: AsyncIterator[dict[str, Any]]) -> dict[str, Any]:
    return await asyncio.wait_for(anext(messages), WAIT)


async def until_result(messages: AsyncIterator[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every message up to and including the turn's result."""
    out = [await next_message(messages)]
    while out[-1]["type"] != "result":
        out.append(await next_message(messages))
    return out


async def init_id(messages: AsyncIterator[dict[str, Any]]) -> str:
    first = await next_message(messages)
    assert first["type"] == "system" and first["subtype"] == "init"
    return str(first["session_id"])


def deltas(turn: list[dict[str, Any]]) -> list[str]:
    return [m["delta"] for m in turn if m["type"] == "stream_event"]


def test_options_and_the_api_key_fallbacks(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = get_engine("openai", {"base_url": "http://127.0.0.1:1/v1", "model": "m", "temperature": "0.5"})
    assert isinstance(engine, OpenAIEngine)
    assert (engine.base_url, engine.model, engine.temperature) == ("http://127.0.0.1:1/v1", "m", 0.5)
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    assert OpenAIEngine({}).api_key == "from-env"
    assert OpenAIEngine({"api_key": "given"}).api_key == "given"
    monkeypatch.delenv("OPENAI_API_KEY")
    assert OpenAIEngine({}).api_key == PLACEHOLDER_API_KEY


async def test_a_turn_streams_deltas_then_the_assistant_message_and_the_result(
    fake: FakeChatCompletions, start: StartRun
) -> None:
    run, messages = await start(engine_for(fake, system_prompt="Be brief.", temperature=0))
    session_id = await init_id(messages)
    assert str(uuid.UUID(session_id)) == session_id

    await run.send(UserTurn(text="hello there"))
    turn = await until_result(messages)

    assert [m["type"] for m in turn] == ["stream_event"] * 4 + ["assistant", "result"]
    assert deltas(turn) == ["You", " said:", " hello", " there"]
    assert len({m["message_id"] for m in turn[:-1]}) == 1
    assistant, result = turn[-2:]
    assert assistant["content"] == [{"type": "text", "text": "You said: hello there"}]
    assert result == {
        "type": "result",
        "subtype": "success",
        "session_id": session_id,
        "is_error": False,
        "result": "You said: hello there",
        "num_turns": 1,
    }
    [body] = fake.requests
    assert body["model"] == "test-model" and body["stream"] is True and body["temperature"] == 0
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hello there"},
    ]
    assert fake.authorizations == ["Bearer test-key"]


async def test_queued_turns_are_answered_in_order_each_with_the_history_before_it(
    fake: FakeChatCompletions, start: StartRun
) -> None:
    run, messages = await start(engine_for(fake))
    await init_id(messages)
    await run.send(UserTurn(text="one"))
    await run.send(UserTurn(text="two"))  # sent before the first is answered

    first, second = await until_result(messages), await until_result(messages)

    assert (first[-1]["result"], second[-1]["result"]) == ("You said: one", "You said: two")
    assert first[0]["message_id"] != second[0]["message_id"]
    assert fake.requests[1]["messages"] == [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "You said: one"},
        {"role": "user", "content": "two"},
    ]


async def test_resume_rebuilds_the_history_through_an_injected_loader(
    fake: FakeChatCompletions, start: StartRun
) -> None:
    asked: list[str] = []
    earlier = [{"role": "user", "content": "earlier"}, {"role": "assistant", "content": "noted"}]

    async def loader(engine_session_id: str) -> list[dict[str, Any]]:
        asked.append(engine_session_id)
        return earlier

    engine = OpenAIEngine(
        {"base_url": fake.url, "api_key": "k", "model": "m", "system_prompt": "sys"}, history_loader=loader
    )
    run, messages = await start(engine, resume="conv-42")
    assert await init_id(messages) == "conv-42"
    await run.send(UserTurn(text="again"))
    turn = await until_result(messages)

    assert turn[-1]["session_id"] == "conv-42"
    assert asked == ["conv-42"]
    assert fake.requests[0]["messages"] == [
        {"role": "system", "content": "sys"},
        *earlier,
        {"role": "user", "content": "again"},
    ]


async def test_a_failing_history_loader_is_an_engine_error(fake: FakeChatCompletions) -> None:
    async def loader(engine_session_id: str) -> list[dict[str, Any]]:
        raise RuntimeError("database is down")

    engine = OpenAIEngine({"base_url": fake.url, "api_key": "k"}, history_loader=loader)
    with pytest.raises(EngineError, match="database is down"):
        await engine.start(resume="conv-1")


def write_transcript(user: Any, engine_session_id: str) -> None:
    """A thread carrying ``engine_session_id``, its steps written out of seq order, with
    steps the history must skip, and another conversation's thread."""
    thread, _ = ensure_thread(user, uuid.uuid4(), name="resumable")
    Thread.objects.filter(pk=thread.pk).update(engine_session_id=engine_session_id)
    other, _ = ensure_thread(user, uuid.uuid4(), name="other")
    Thread.objects.filter(pk=other.pk).update(engine_session_id="someone-else")
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PIXEL}}
    rows: list[tuple[Thread, int, str, str, dict[str, Any]]] = [
        (thread, 4, "assistant_message", "second answer", {}),
        (thread, 1, "user_message", "first question", {}),
        (thread, 2, "tool", "a tool ran", {}),
        (thread, 3, "assistant_message", "first answer", {}),
        (thread, 5, "assistant_message", "The turn failed.", {"is_error": True}),
        (thread, 6, "assistant_message", "", {}),
        (
            thread,
            7,
            "user_message",
            "what is this?",
            {"content": [image, {"type": "text", "text": "what is this?"}]},
        ),
        (other, 1, "user_message", "not this conversation", {}),
    ]
    for owner, seq, kind, output, extra in rows:
        Step.objects.create(
            id=uuid.uuid4(),
            thread=owner,
            seq=seq,
            type=kind,
            output=output,
            created_at=timezone.now(),
            **extra,
        )


@pytest.mark.django_db(transaction=True)
async def test_resume_rebuilds_the_history_from_the_transcript_the_pool_hands_it(
    fake: FakeChatCompletions, start: StartRun, make_user: Callable[..., Any]
) -> None:
    user = await database_sync_to_async(make_user)()
    await database_sync_to_async(write_transcript)(user, "conv-db")
    base = {"base_url": fake.url, "api_key": "test-key", "model": "test-model", "max_retries": 0}
    engine = get_engine("openai", base, transcript=transcript.engine_conversation)  # as the pool builds it

    run, messages = await start(engine, resume="conv-db")
    assert await init_id(messages) == "conv-db"
    await run.send(UserTurn(text="and now?"))
    assert (await until_result(messages))[-1]["subtype"] == "success"

    assert fake.requests[0]["messages"] == [
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "first answer"},
        {"role": "assistant", "content": "second answer"},
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PIXEL}"}},
                {"type": "text", "text": "what is this?"},
            ],
        },
        {"role": "user", "content": "and now?"},
    ]

    # An id no thread carries resumes into an empty history (the id is kept).
    run, messages = await start(engine_for(fake), resume="conv-unknown")
    assert await init_id(messages) == "conv-unknown"
    await run.send(UserTurn(text="hi"))
    await until_result(messages)
    assert fake.requests[1]["messages"] == [{"role": "user", "content": "hi"}]


async def test_an_image_block_reaches_the_server_as_a_data_url(
    fake: FakeChatCompletions, start: StartRun
) -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PIXEL}}
    run, messages = await start(engine_for(fake))
    await init_id(messages)
    await run.send(UserTurn(text="describe it", images=[image]))
    turn = await until_result(messages)

    assert turn[-1]["result"] == "You said: describe it"
    assert fake.requests[0]["messages"][-1] == {
        "role": "user",
        "content": [
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PIXEL}"}},
            {"type": "text", "text": "describe it"},
        ],
    }


async def test_a_server_error_is_an_error_result_and_the_run_answers_the_next_turn(
    fake: FakeChatCompletions, start: StartRun
) -> None:
    run, messages = await start(engine_for(fake))
    session_id = await init_id(messages)
    await run.send(UserTurn(text="!500 please"))
    [failed] = await until_result(messages)

    assert failed["subtype"] == "error" and failed["is_error"] is True
    assert failed["session_id"] == session_id
    assert "500" in failed["result"] and "the model is on fire" in failed["result"]

    await run.send(UserTurn(text="still there?"))
    turn = await until_result(messages)
    assert turn[-1]["subtype"] == "success" and turn[-1]["result"] == "You said: still there?"
    assert not run.closed.is_set()
    # The rejected turn left the history, so it cannot make every later request fail too.
    assert fake.requests[1]["messages"] == [{"role": "user", "content": "still there?"}]


async def test_interrupt_mid_stream_drops_the_request_and_reports_interrupted(
    fake: FakeChatCompletions, start: StartRun
) -> None:
    run, messages = await start(engine_for(fake))
    session_id = await init_id(messages)
    await run.send(UserTurn(text="!slow 200"))
    first = await next_message(messages)
    assert first["type"] == "stream_event"

    await run.interrupt()
    rest = await until_result(messages)
    assert [m["type"] for m in rest if m["type"] != "stream_event"] == ["result"]
    assert len(deltas([first, *rest])) < 50
    assert rest[-1] == {
        "type": "result",
        "subtype": "interrupted",
        "session_id": session_id,
        "is_error": False,
        "result": None,
        "num_turns": 1,
    }
    await asyncio.wait_for(fake.aborted.wait(), WAIT)  # the HTTP stream was really dropped

    await run.send(UserTurn(text="after"))
    turn = await until_result(messages)
    assert turn[-1]["result"] == "You said: after"
    # The interrupted question stays in the history; its partial answer does not.
    assert fake.requests[1]["messages"] == [
        {"role": "user", "content": "!slow 200"},
        {"role": "user", "content": "after"},
    ]


async def test_interrupt_when_idle_is_a_no_op_and_close_ends_the_run(
    fake: FakeChatCompletions, start: StartRun
) -> None:
    run, messages = await start(engine_for(fake))
    await init_id(messages)
    await run.interrupt()
    await asyncio.wait_for(run.close(), WAIT)

    assert run.closed.is_set()
    assert [m async for m in run.messages()] == []  # nothing after init: no stray result
    with pytest.raises(StopAsyncIteration):
        await next_message(messages)
    with pytest.raises(EngineError):
        await run.send(UserTurn(text="too late"))
    await run.close()  # idempotent
    assert fake.requests == []


async def test_close_lets_the_turn_in_flight_finish(fake: FakeChatCompletions, start: StartRun) -> None:
    run, messages = await start(engine_for(fake))
    await init_id(messages)
    await run.send(UserTurn(text="!slow 5"))
    assert (await next_message(messages))["type"] == "stream_event"

    await asyncio.wait_for(run.close(), WAIT)

    rest = [m async for m in messages]
    assert [m["type"] for m in rest][-2:] == ["assistant", "result"]
    assert rest[-1]["subtype"] == "success" and rest[-1]["result"] == "".join(f" tok{i}" for i in range(5))
    assert run.closed.is_set()


async def test_close_cuts_a_turn_that_outlasts_the_grace(fake: FakeChatCompletions, start: StartRun) -> None:
    run, messages = await start(engine_for(fake, close_grace=0.2))
    await init_id(messages)
    await run.send(UserTurn(text="!slow 200"))
    assert (await next_message(messages))["type"] == "stream_event"

    began = time.monotonic()
    await asyncio.wait_for(run.close(), WAIT)
    assert time.monotonic() - began < 2.0

    rest = [m async for m in messages]
    assert {m["type"] for m in rest} <= {"stream_event"}  # cut: no assistant, no result
    assert run.closed.is_set()
    await asyncio.wait_for(fake.aborted.wait(), WAIT)
