"""ChatSession against the real echo engine subprocess and a real database."""

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
from asgiref.sync import sync_to_async

from sessions_app.runtime.chat_session import ChatSession
from sessions_app.runtime.engines.base import UserTurn
from sessions_app.runtime.engines.echo import EchoEngine, EchoRun
from sessions_app.runtime.phases import Phase
from tests.sessions_app.runtime.conftest import accepted_ids_in, accepted_turn, transcript
from tests.support.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


async def turn(thread, text: str) -> UserTurn:
    return await accepted_turn(thread, text)


async def test_a_turn_streams_and_lands_in_the_transcript(make_thread, echo, sink):
    thread = await make_thread()
    one_event_per_token = EchoEngine({"state_dir": str(echo.state_dir), "coalesce": False})
    session = ChatSession(thread_id=thread.id, engine=one_event_per_token, emit=sink)
    assert await session.send(await turn(thread, "!slow 0.02\nhello world"))
    await wait_until(lambda: sink.named("task_end"))
    tokens = [t["token"] for t in sink.named("stream_token")]
    assert tokens == ["Echo", " #1:", " hello", " world"]
    steps = await transcript(thread)
    assert [(s.type, s.output) for s in steps] == [
        ("user_message", "!slow 0.02\nhello world"),
        ("assistant_message", "Echo #1: hello world"),
    ]
    assert session.engine_session_id and session.phase is Phase.READY
    await session.stop()
    # cast: mypy keeps the READY from the assert above across stop(), which moved the phase
    assert cast(Phase, session.phase) is Phase.IDLE and session.runs_open == 0


async def test_sends_while_busy_queue_and_drain_as_one_merged_turn(make_thread, echo, sink):
    thread = await make_thread()
    session = ChatSession(thread_id=thread.id, engine=echo, emit=sink)
    assert await session.send(await turn(thread, "!slow 0.05\nfirst message here"))
    for text in ("second", "third"):
        assert not await session.send(await turn(thread, text))
        session.enqueue(await turn(thread, text))
    await wait_until(lambda: len(sink.named("task_end")) == 2)
    steps = await transcript(thread)
    users = [s.output for s in steps if s.type == "user_message"]
    assert users == ["!slow 0.05\nfirst message here", "second\n\nthird"]
    assert [s.output for s in steps if s.type == "assistant_message"] == [
        "Echo #1: first message here",
        "Echo #2: second\n\nthird",
    ]
    assert session.runs_started == 1
    await session.stop()


async def test_kill_9_mid_turn_with_three_queued_starts_a_fresh_run_and_merges(make_thread, echo, sink):
    thread = await make_thread()
    session = ChatSession(thread_id=thread.id, engine=echo, emit=sink)
    first = await turn(thread, "!slow 0.2\na long answer that will be cut short")
    assert await session.send(first)
    queued = [await turn(thread, f"queued {i}") for i in range(3)]
    for t in queued:
        assert await session.submit(t)  # True: it waits in the queue
    await wait_until(lambda: sink.named("stream_token"))
    first_pid = cast(EchoRun, session.run).pid
    os.kill(first_pid, signal.SIGKILL)

    await wait_until(lambda: session.runs_started == 2 and session.phase is Phase.READY and not session.queue)
    assert cast(EchoRun, session.run).pid != first_pid
    steps = await transcript(thread)
    users = [s for s in steps if s.type == "user_message"]
    assert [u.output for u in users] == [first.text, "queued 0\n\nqueued 1\n\nqueued 2"]
    ids = accepted_ids_in(steps)
    expected = [str(i) for t in [first, *queued] for i in t.message_ids]
    assert sorted(ids) == sorted(expected) and len(ids) == len(set(ids))
    assert any(s.is_error for s in steps), "the cut turn says the engine stopped"
    # The fresh run resumed the engine's conversation: the echo counts on from turn 1.
    assert steps[-1].output == "Echo #2: queued 0\n\nqueued 1\n\nqueued 2"
    assert session.runs_open == 1
    await session.stop()


async def test_stop_clears_the_queue_and_does_not_drain(make_thread, echo, sink):
    thread = await make_thread()
    session = ChatSession(thread_id=thread.id, engine=echo, emit=sink)
    assert await session.send(await turn(thread, "!slow 0.2\none two three four five"))
    dropped = await turn(thread, "never answered")
    assert await session.submit(dropped)
    await wait_until(lambda: sink.named("stream_token"))
    await session.stop()
    assert session.phase is Phase.IDLE and session.queue == [] and session.dropped == dropped.accepted_ids
    assert (Phase.STREAMING, Phase.STOPPING) in session.phase_log
    await asyncio.sleep(0.3)
    assert session.runs_started == 1 and session.runs_open == 0
    outputs = [s.output for s in await transcript(thread)]
    assert "never answered" not in outputs


async def test_restart_drains_the_queue_into_a_fresh_run(make_thread, echo, sink):
    thread = await make_thread()
    session = ChatSession(thread_id=thread.id, engine=echo, emit=sink)
    assert await session.send(await turn(thread, "!slow 0.05\nwarm up now"))
    waiting = await turn(thread, "after restart")
    assert await session.submit(waiting)
    await session.restart()
    await wait_until(
        lambda: any(s["output"] == "Echo #2: after restart" for s in sink.named("update_message"))
    )
    assert session.runs_started == 2 and session.runs_open == 1
    await session.stop()


async def test_reset_session_forgets_the_engine_conversation(make_thread, echo, sink):
    thread = await make_thread()
    session = ChatSession(thread_id=thread.id, engine=echo, emit=sink)
    await session.send(await turn(thread, "one"))
    await wait_until(lambda: sink.named("task_end"))
    first_id = session.engine_session_id
    await session.reset_session()
    assert session.engine_session_id is None
    await session.send(await turn(thread, "two"))
    await wait_until(lambda: len(sink.named("task_end")) == 2)
    assert session.engine_session_id != first_id
    assert sink.named("update_message")[-1]["output"] == "Echo #1: two"
    await session.stop()


async def test_the_busy_flip_lets_a_result_listener_send_at_once(make_thread, echo, sink):
    thread = await make_thread()
    sent_from_listener: list[bool] = []

    async def listener(event: str, data: object) -> None:
        await sink(event, data)
        if event == "task_end" and not sent_from_listener:
            # The phase is already ready when the result's side effects run.
            sent_from_listener.append(await session.send(await turn(thread, "follow up")))

    session = ChatSession(thread_id=thread.id, engine=echo, emit=listener)
    await session.send(await turn(thread, "hello"))
    await wait_until(lambda: len(sink.named("task_end")) == 2)
    assert sent_from_listener == [True]
    await session.stop()


async def test_in_the_close_window_send_refuses_instead_of_racing_a_second_run(make_thread, echo, sink):
    thread = await make_thread()
    session = ChatSession(thread_id=thread.id, engine=echo, emit=sink)
    await session.send(await turn(thread, "hello"))
    await wait_until(lambda: sink.named("task_end"))
    assert session.run is not None
    session.run.closed.set()  # the handle closed; the pump has not ended yet
    assert session.in_close_window()
    assert not await session.send(await turn(thread, "too early"))
    assert session.runs_started == 1
    await session.stop()


async def test_a_fast_reply_may_arrive_in_bigger_pieces_but_whole_and_in_order(make_thread, echo, sink):
    thread = await make_thread()
    session = ChatSession(thread_id=thread.id, engine=echo, emit=sink)
    words = " ".join(f"w{i}" for i in range(3000))
    await session.send(await turn(thread, words))
    await wait_until(lambda: sink.named("task_end"))
    tokens = [t["token"] for t in sink.named("stream_token")]
    assert "".join(tokens) == f"Echo #1: {words}"
    assert len({t["id"] for t in sink.named("stream_token")}) == 1
    assert sink.named("update_message")[-1]["output"] == f"Echo #1: {words}"
    await session.stop()


async def test_an_engine_reply_past_the_step_budget_streams_and_lands_cut_with_one_marker(
    make_thread, echo, sink, settings
):
    settings.STEP_MAX_BYTES = 140  # 40 bytes of streamed text, and the marker's room
    thread = await make_thread()
    one_event_per_token = EchoEngine({"state_dir": str(echo.state_dir), "coalesce": False})
    session = ChatSession(thread_id=thread.id, engine=one_event_per_token, emit=sink)
    words = " ".join(f"word{i}" for i in range(30))
    assert await session.send(await turn(thread, words))
    await wait_until(lambda: sink.named("task_end"))
    streamed = "".join(t["token"] for t in sink.named("stream_token"))
    assert streamed.count("[truncated") == 1 and len(streamed.encode()) <= 140
    user_step, reply = await transcript(thread)
    assert "[truncated" in user_step.output and "[truncated" in reply.output  # both cut at write
    assert len(reply.output.encode()) <= 140 and reply.metadata["truncated"] is True
    await session.stop()


class LateResultRun:
    """A run whose turn's result comes ``delay`` seconds after its complete reply (an engine
    that says nothing in between): the held reply must not wait for it."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.closed = asyncio.Event()
        self._turns: asyncio.Queue[UserTurn | None] = asyncio.Queue()

    async def send(self, turn: UserTurn) -> None:
        await self._turns.put(turn)

    async def messages(self) -> AsyncIterator[dict[str, Any]]:
        while (turn := await self._turns.get()) is not None:
            reply = f"late: {turn.text}"
            yield {"type": "assistant", "message_id": "m1", "content": [{"type": "text", "text": reply}]}
            await asyncio.sleep(self.delay)
            yield {"type": "result", "subtype": "success", "is_error": False, "result": reply, "num_turns": 1}

    async def interrupt(self) -> None:
        pass

    async def close(self) -> None:
        await self._turns.put(None)


class LateResultEngine:
    def __init__(self, delay: float) -> None:
        self.delay = delay

    async def start(self, *, resume: str | None = None) -> LateResultRun:
        return LateResultRun(self.delay)


async def test_a_reply_whose_result_is_late_is_written_and_shown_before_it(make_thread, sink):
    """The reply held for the turn's result (one write with the outcome) is written on its own
    once ``REPLY_HOLD`` passes, shown once, and the outcome still lands after it."""
    from sessions_app.runtime import chat_session
    from threads_app.models import AcceptedMessage

    thread = await make_thread()
    session = ChatSession(
        thread_id=thread.id, engine=LateResultEngine(delay=chat_session.REPLY_HOLD * 60), emit=sink
    )
    sent = await turn(thread, "hello")
    assert await session.send(sent)
    await wait_until(lambda: sink.named("new_message")[1:])  # the user step, then the reply
    assert not sink.named("task_end"), sink.events  # shown while the result is still to come
    steps = await transcript(thread)
    assert [(s.type, s.output) for s in steps] == [
        ("user_message", "hello"),
        ("assistant_message", "late: hello"),
    ]
    await wait_until(lambda: sink.named("task_end"))
    replies = [
        m
        for m in sink.named("new_message") + sink.named("update_message")
        if m["type"] == "assistant_message"
    ]
    assert [m["output"] for m in replies] == ["late: hello"], sink.events
    outcome = await sync_to_async(
        lambda: AcceptedMessage.objects.values_list("outcome", flat=True).get(pk=sent.accepted_ids[0])
    )()
    assert outcome == "replied"
    await session.stop()
