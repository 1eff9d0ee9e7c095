"""The engine runtime across two daphne processes: a box's sessions live in one process.

Two tabs of one user on two servers send to the same thread: the box's owner runs one engine
run for the thread, both tabs see the replies, and the queue/drain contract holds across the
processes. Skipped unless PostgreSQL and Redis are shared.
"""

import asyncio

import pytest
from asgiref.sync import sync_to_async

from tests.support.client import signed_in
from threads_app.models import Box, Step

pytestmark = [
    pytest.mark.two_process,  # skipped without PostgreSQL and Redis (tests/conftest.py)
    pytest.mark.django_db(transaction=True),
]


@pytest.fixture(scope="module")
def engine_pair(server_factory, tmp_path_factory):
    env = {"CHAT_APP": "sessions_app.default_app", "ECHO_STATE_DIR": str(tmp_path_factory.mktemp("echo"))}
    a, b = server_factory.start(**env), server_factory.start(**env)
    yield a, b
    a.stop()
    b.stop()


@sync_to_async
def transcript(thread_id: str) -> list[tuple[str, str]]:
    return list(Step.objects.filter(thread_id=thread_id).order_by("seq").values_list("type", "output"))


async def test_two_tabs_on_two_processes_share_one_run_for_the_thread(engine_pair, make_user):
    a, b = engine_pair
    user = make_user()
    tab_a = await signed_in(a, user)
    await tab_a.start()
    first = await tab_a.send("!slow 0.1\nfirst from tab a")
    thread_id = first["threadId"]
    await tab_a.wait_event("stream_token")

    tab_b = await signed_in(b, user)
    await tab_b.start(thread_id=thread_id)
    await tab_b.wait_event("resume_thread")
    second = await tab_b.send("from tab b")
    assert second["queued"] is True  # the run on A is busy: B's message waits for it

    await tab_a.wait_for(lambda c: len(c.replies()) == 2, timeout=20)
    await tab_b.wait_for(lambda c: "Echo #2: from tab b" in c.replies(), timeout=20)
    # One engine conversation answered both, in order: the echo counted 1 then 2.
    assert tab_a.replies() == ["Echo #1: first from tab a", "Echo #2: from tab b"]
    assert await transcript(thread_id) == [
        ("user_message", "!slow 0.1\nfirst from tab a"),
        ("assistant_message", "Echo #1: first from tab a"),
        ("user_message", "from tab b"),
        ("assistant_message", "Echo #2: from tab b"),
    ]
    owners = await sync_to_async(
        lambda: list(Box.objects.filter(owner=user).values_list("runtime_owner", flat=True))
    )()
    assert len(owners) == 1 and owners[0]

    # stop from the tab on the other process interrupts the run on the owner.
    tab_a.events.clear()
    tab_b.events.clear()
    await tab_b.send("!slow 0.3\na long answer that is stopped from tab b")
    await tab_b.wait_event("stream_token", timeout=10)
    await tab_b.emit("stop")
    await tab_b.wait_text("Task manually stopped.")
    await asyncio.sleep(1.0)
    assert not any("stopped from tab b" in r for r in tab_a.replies() + tab_b.replies())
    await tab_a.disconnect()
    await tab_b.disconnect()
