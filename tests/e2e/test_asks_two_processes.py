"""Asks across two daphne processes sharing PostgreSQL and Redis: the hook waits in process A,
and the answer comes through process B (another tab there, or the same session after its
socket moved to B). The answer reaches the hook once, every tab is cleared. Skipped unless
``DATABASE_URL`` and ``REDIS_URL`` are set (SQLite and the in-memory layer cannot be shared)."""

from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sessions_app.processes import live_processes
from tests.sessions_app.test_asks_socket import ask_row, asked, tab, transcript
from tests.support.waiting import wait_until_async
from threads_app.models import Ask

pytestmark = [pytest.mark.two_process, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def pair(server_factory) -> Iterator[tuple[Any, Any]]:
    a = server_factory.start(CHAT_APP="tests.apps.asks_app")
    b = server_factory.start(CHAT_APP="tests.apps.asks_app")
    yield a, b
    a.stop()
    b.stop()


async def test_a_tab_on_another_process_answers_the_ask_once(pair, make_user) -> None:
    a, b = pair
    user = make_user()
    first = await tab(a, user)
    await first.start()
    thread_id = str((await first.send("ask name"))["threadId"])
    ask = await asked(first)
    second = await tab(b, user)
    await second.start(thread_id=thread_id)
    assert (await asked(second))["spec"]["askId"] == ask["spec"]["askId"]
    answer = await second.call("ask_answer", {"askId": ask["spec"]["askId"], "answer": {"output": "Far"}})
    assert answer["success"]
    await first.wait_text("Hello, Far!")  # the hook in A read the answer B took
    await first.wait_for(lambda c: any(isinstance(e, dict) for e in c.named("clear_ask")))
    assert (await ask_row(ask["spec"]["askId"])).state == Ask.State.ANSWERED
    assert [o for _t, o in await transcript(thread_id)].count("Hello, Far!") == 1
    await first.disconnect()
    await second.disconnect()


async def test_a_session_that_moves_to_another_process_mid_ask_answers_it_there(pair, make_user) -> None:
    a, b = pair
    client = await tab(a, make_user())
    await client.start()
    thread_id = str((await client.send("ask name"))["threadId"])
    ask = await asked(client)
    await client.disconnect()
    client.base_url = b.url
    client.events.clear()
    client.ack_with = {"output": "Moved"}  # answered by the ack, on B
    await client.start(thread_id=thread_id)
    assert (await asked(client))["spec"]["askId"] == ask["spec"]["askId"]
    await client.wait_text("Hello, Moved!")
    await client.disconnect()


@pytest.fixture(params=["recovery", "answer"])
def doomed_pair(request, server_factory) -> Iterator[tuple[str, Any, Any]]:
    """A pair whose process A is killed by the test. For ``answer``, B's recovery loop is slow
    (60 s), so the answer that comes first is what finds the asker dead."""
    a = server_factory.start(CHAT_APP="tests.apps.asks_app")
    b = server_factory.start(
        CHAT_APP="tests.apps.asks_app", RECOVERY_EVERY="60" if request.param == "answer" else "1"
    )
    yield request.param, a, b
    a.stop()
    b.stop()


async def test_an_ask_whose_process_dies_is_closed_and_an_answer_is_never_taken_and_dropped(
    doomed_pair, make_user
) -> None:
    how, a, b = doomed_pair
    user = make_user()
    asking = await tab(a, user)
    await asking.start()
    thread_id = str((await asking.send("ask name"))["threadId"])
    ask = await asked(asking)
    ask_id = ask["spec"]["askId"]
    other = await tab(b, user)  # another tab of the thread, on B
    await other.start(thread_id=thread_id)
    await asked(other)
    a.kill()  # the hook waiting for the answer dies with A
    await wait_until_async(lambda: _judged_dead(a.process.pid), timeout=15)
    if how == "recovery":  # B's recovery loop closes it and every tab is told why
        await other.wait_for(
            lambda c: any(isinstance(d, dict) and d.get("reason") for d in c.named("clear_ask")), timeout=15
        )
    answer = await other.call("ask_answer", {"askId": ask_id, "answer": {"output": "Too late"}})
    row = await ask_row(ask_id)
    # Refused (how depends on who closed it first: the recovery loop, or this answer finding
    # its asker dead), and not taken: nobody waits for it.
    assert not answer.get("success"), answer
    assert (row.state, row.answer) == (Ask.State.CANCELLED, None), (answer, row.state, await _live())
    if how == "answer":  # (another server's recovery loop on this database may close it first)
        assert (
            "server that asked this question stopped" in answer["error"] or "no open ask" in answer["error"]
        ), answer
    await other.wait_for(
        lambda c: any(
            isinstance(d, dict) and d.get("askId") == ask_id and d.get("reason") for d in c.named("clear_ask")
        ),
        timeout=10,
    )
    await other.disconnect()


@sync_to_async
def _judged_dead_sync(pid: int) -> bool:
    return not live_processes().filter(pid=pid).exists()


async def _judged_dead(pid: int) -> bool:
    return await _judged_dead_sync(pid)


@sync_to_async
def _live() -> list[tuple[str, int]]:
    return list(live_processes().values_list("address", "pid"))
