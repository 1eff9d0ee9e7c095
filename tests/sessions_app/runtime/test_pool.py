"""BoxPool and ChatThreadSession: one active integration thread per box."""

import asyncio

import pytest
from asgiref.sync import sync_to_async

from sessions_app.runtime.phases import Phase
from sessions_app.runtime.pool import BoxAtCapacity, BoxPool, BoxPools
from sessions_app.runtime.thread_session import SessionBusy
from tests.sessions_app.runtime.conftest import accepted_turn, transcript
from tests.support.waiting import wait_until
from threads_app.models import Box, Thread

pytestmark = pytest.mark.django_db(transaction=True)


async def test_two_threads_alternating_keep_one_run_open_and_their_own_conversations(make_thread, echo):
    first, second = await make_thread("first"), await make_thread("second")
    pool = BoxPool(first.box_id, lambda: echo)
    open_runs: list[int] = []
    answers: dict[str, list[str]] = {"first": [], "second": []}
    for round_ in range(3):
        for thread in (first, second):
            text = f"{thread.name} round {round_}"
            response = await pool.send_to_thread(thread.id, await accepted_turn(thread, text))
            answers[thread.name].append(response.text)
            open_runs.append(pool.runs_open())
    assert open_runs == [1] * 6
    # Each thread's engine conversation survived parking: the echo counts its own turns.
    assert answers["first"] == [f"Echo #{n + 1}: first round {n}" for n in range(3)]
    assert answers["second"] == [f"Echo #{n + 1}: second round {n}" for n in range(3)]
    ids = {pool.thread_sessions[t.id].engine_session_id for t in (first, second)}
    assert len(ids) == 2 and None not in ids
    assert [s.output for s in await transcript(first)][-2:] == ["first round 2", "Echo #3: first round 2"]
    await pool.close()
    assert pool.runs_open() == 0


async def test_a_message_for_another_thread_parks_the_active_one_after_its_turn(make_thread, echo):
    first, second = await make_thread("first"), await make_thread("second")
    pool = BoxPool(first.box_id, lambda: echo)
    slow = asyncio.create_task(
        pool.send_to_thread(first.id, await accepted_turn(first, "!slow 0.05\nslow answer here please"))
    )
    await asyncio.sleep(0.2)
    with pytest.raises(SessionBusy):
        await pool.thread_sessions[first.id].send(await accepted_turn(first, "again"))
    other = await pool.send_to_thread(second.id, await accepted_turn(second, "other"))
    done = await slow
    assert done.text == "Echo #1: slow answer here please" and not done.is_error
    assert other.text == "Echo #1: other"
    assert pool.thread_sessions[first.id].phase is Phase.IDLE
    assert pool.active_thread == second.id and pool.runs_open() == 1
    await pool.close()


async def test_thread_sessions_deliver_complete_responses_with_tool_steps(make_thread, echo):
    thread = await make_thread()
    pool = BoxPool(thread.box_id, lambda: echo)
    response = await pool.send_to_thread(thread.id, await accepted_turn(thread, "!tool\nuse it"))
    assert response.text == "Echo #1: use it"
    steps = await transcript(thread)
    assert [(s.type, s.output) for s in steps] == [
        ("user_message", "!tool\nuse it"),
        ("tool", "USE IT"),
        ("assistant_message", "Echo #1: use it"),
    ]
    failed = await pool.send_to_thread(thread.id, await accepted_turn(thread, "!fail\nx"))
    assert failed.is_error and failed.outcome == "error"
    await pool.close()


async def test_a_reconfigured_pool_lets_a_turn_in_flight_finish_then_replaces_the_session(
    make_thread, sink, tmp_path, settings
):
    settings.ECHO_STATE_DIR = tmp_path / "echo"
    thread = await make_thread()
    pools_ = BoxPools()
    before, after = {"state_dir": str(tmp_path / "before")}, {"state_dir": str(tmp_path / "after")}
    pool = pools_.for_box(thread.box_id, "echo", before)
    old = await pool.chat_session(thread.id, emit=sink)
    old.submit_soon(await accepted_turn(thread, "!slow 0.05\nslow words in flight"))
    await wait_for(old.is_busy)

    # The box changed mid-turn (as the admin would): the same pool, reconfigured.
    assert pools_.for_box(thread.box_id, "echo", after) is pool
    assert await pool.chat_session(thread.id, emit=sink) is old  # not cut mid-turn
    # The turn's end (its reply is written with its outcome, after the phase flips to ready).
    await wait_for(lambda: bool(sink.named("task_end")))
    assert [s.output for s in await transcript(thread)][-1] == "Echo #1: slow words in flight"

    new = await pool.chat_session(thread.id, emit=sink)
    assert new is not old and old.runs_open == 0
    await new.submit(await accepted_turn(thread, "next"))
    # As above: the phase is ready before the reply is written, so wait for the turn's end.
    await wait_for(lambda: len(sink.named("task_end")) == 2)
    # Same engine: the conversation id is kept; the new state directory knows no turns of it.
    assert new.engine_session_id == old.engine_session_id
    assert [s.output for s in await transcript(thread)][-1] == "Echo #1: next"
    assert (tmp_path / "after" / f"{new.engine_session_id}.json").exists()
    assert await pool.chat_session(thread.id, emit=sink) is new  # unchanged box: kept
    await pool.close()


async def wait_for(condition, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, "condition never held"
        await asyncio.sleep(0.02)


async def test_idle_sessions_are_closed_and_their_conversations_resume(make_thread, echo, sink):
    """ENGINE_IDLE_TIMEOUT: a session nobody used for that long loses its engine run, not its
    conversation; a busy one is kept, and counts as used while it is busy."""
    idle, busy = await make_thread("idle"), await make_thread("busy")
    pool = BoxPool(idle.box_id, lambda: echo)
    session = await pool.chat_session(idle.id, emit=sink)
    await session.submit(await accepted_turn(idle, "one"))
    await wait_until(lambda: len(sink.named("task_end")) == 1)
    conversation = session.engine_session_id
    assert conversation is not None and pool.runs_open() == 1
    assert await pool.close_idle(idle_for=60) == 0  # not idle long enough

    worker = await pool.chat_session(busy.id, emit=sink)
    worker.submit_soon(await accepted_turn(busy, "!slow 0.05\na b c d"))
    await asyncio.sleep(0.05)
    assert await pool.close_idle(idle_for=0) == 1  # the idle one; the busy one is kept
    assert list(pool.chat_sessions) == [busy.id]
    assert session.run is None

    again = await pool.chat_session(idle.id, emit=sink)
    assert again is not session and again.engine_session_id == conversation
    await again.submit(await accepted_turn(idle, "two"))
    await wait_until(lambda: len(sink.named("task_end")) == 3)  # the slow one's, then this one's
    assert [s.output for s in await transcript(idle)][-1] == "Echo #2: two"  # the same conversation
    await pool.close()


async def test_a_box_at_capacity_closes_an_idle_run_for_a_new_thread_or_makes_it_wait(
    make_thread, echo, sink, settings
):
    """ENGINE_SESSIONS_PER_BOX bounds a box's engine runs: a new thread's session replaces
    the least recently used idle one, and while every run is busy it is refused (its sends
    stay pending until one is idle)."""
    settings.ENGINE_SESSIONS_PER_BOX = 2
    first, second, third = [await make_thread(name) for name in ("first", "second", "third")]
    pool = BoxPool(first.box_id, lambda: echo)
    for thread in (first, second):
        session = await pool.chat_session(thread.id, emit=sink)
        session.submit_soon(await accepted_turn(thread, "!slow 0.1\na b c"))
    await wait_until(lambda: pool.runs_open() == 2)
    with pytest.raises(BoxAtCapacity):
        await pool.chat_session(third.id, emit=sink)
    assert pool.runs_open() == 2

    await wait_until(lambda: len(sink.named("task_end")) == 2)
    await pool.chat_session(third.id, emit=sink)
    assert list(pool.chat_sessions) == [second.id, third.id]  # the first, least recently used, made room
    assert pool.runs_open() == 1  # second's run; third's starts with its first turn
    await pool.close()


async def test_the_process_cap_closes_the_least_recently_used_idle_run_of_any_box(
    make_thread, echo, sink, settings
):
    """ENGINE_SESSIONS_PER_PROCESS bounds the runs of all boxes together (a user may own
    several): a new session closes the idle one used longest ago, whichever box it is in."""
    settings.ENGINE_SESSIONS_PER_PROCESS = 2
    pools = BoxPools()
    old, recent, new = [await make_thread(name) for name in ("old", "recent", "new")]
    other_box = await sync_to_async(Box.objects.create)(owner=make_thread.user, name="second box")
    await sync_to_async(Thread.objects.filter(pk=recent.pk).update)(box=other_box)
    first_pool = pools.for_box(old.box_id, "echo", {"state_dir": str(echo.state_dir)})
    second_pool = pools.for_box(other_box.id, "echo", {"state_dir": str(echo.state_dir)})
    await first_pool.chat_session(old.id, emit=sink)
    await second_pool.chat_session(recent.id, emit=sink)

    await first_pool.chat_session(new.id, emit=sink)
    assert list(first_pool.chat_sessions) == [new.id]  # "old" made room, from the same box
    assert list(second_pool.chat_sessions) == [recent.id]
    assert pools.chat_session_count() == 2
    for pool in pools.all():
        await pool.close()
