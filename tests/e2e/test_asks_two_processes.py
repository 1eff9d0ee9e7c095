"""Asks across two daphne processes sharing PostgreSQL and Redis: the hook waits in process A,
and the answer comes through process B (another tab there, or the same session after its
socket moved to B). The answer reaches the hook once, every tab is cleared. Skipped unless
``DATABASE_URL`` and ``REDIS_URL`` are set (SQLite and the in-memory layer cannot be shared)."""

from collections.abc import Iterator
from typing import Any

import pytest

from tests.sessions_app.test_asks_socket import ask_row, asked, tab, transcript
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
