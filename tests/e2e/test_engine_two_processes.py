"""The engine runtime across two daphne processes: a thread's session lives in one process,
the one where its sockets first needed it.

Two tabs of one user on two servers send to the same thread: the thread's owner runs one
engine run for it, both tabs see the replies, and the queue/drain contract holds across the
processes. Two tabs of one user on two servers, each in a thread of its own, have their turns
run where their sockets are. Skipped unless PostgreSQL and Redis are shared.
"""

import asyncio

import pytest
from asgiref.sync import sync_to_async

from sessions_app.models import ServerProcess
from tests.support.client import signed_in
from threads_app.models import Step, Thread

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


@sync_to_async
def owner_pid(thread_id: str) -> int | None:
    """The pid of the process running the thread's session (None: no live process does)."""
    owner = Thread.objects.get(pk=thread_id).runtime_owner
    return ServerProcess.objects.filter(address=owner).values_list("pid", flat=True).first()


async def test_two_tabs_on_two_processes_share_one_run_for_the_thread(engine_pair, make_user):
    a, b = engine_pair
    user = make_user()
    tab_a = await signed_in(a, user)
    await tab_a.start()
    # 0.5 s a token (about 3 s a reply): the run is still busy when a slow machine has signed
    # tab B in and resumed the thread.
    first = await tab_a.send("!slow 0.5\nfirst from tab a")
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
        ("user_message", "!slow 0.5\nfirst from tab a"),
        ("assistant_message", "Echo #1: first from tab a"),
        ("user_message", "from tab b"),
        ("assistant_message", "Echo #2: from tab b"),
    ]
    assert await owner_pid(thread_id) == a.process.pid  # where the thread's first send came from

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


async def test_one_users_threads_run_where_their_sockets_are(engine_pair, make_user):
    """One user (one box) with a tab on each process, each tab in a thread of its own: each
    thread's engine run lives in its tab's process, so no turn crosses processes, and both
    processes run the box's sessions at once."""
    a, b = engine_pair
    user = make_user()
    tab_a, tab_b = await signed_in(a, user), await signed_in(b, user)
    await tab_a.start()
    await tab_b.start()
    try:
        first_a, first_b = await asyncio.gather(
            tab_a.send("!slow 0.05\nhello from a"), tab_b.send("!slow 0.05\nhello from b")
        )
        assert first_a["threadId"] != first_b["threadId"]
        await tab_a.wait_for(lambda c: c.replies() == ["Echo #1: hello from a"], timeout=20)
        await tab_b.wait_for(lambda c: c.replies() == ["Echo #1: hello from b"], timeout=20)
        assert await owner_pid(first_a["threadId"]) == a.process.pid
        assert await owner_pid(first_b["threadId"]) == b.process.pid
        await asyncio.gather(tab_a.send("again from a"), tab_b.send("again from b"))
        await tab_a.wait_for(lambda c: "Echo #2: again from a" in c.replies(), timeout=20)
        await tab_b.wait_for(lambda c: "Echo #2: again from b" in c.replies(), timeout=20)
        assert await owner_pid(first_a["threadId"]) == a.process.pid
        assert await owner_pid(first_b["threadId"]) == b.process.pid
    finally:
        await tab_a.disconnect()
        await tab_b.disconnect()


async def test_an_edit_from_a_tab_on_the_other_process_is_made_where_the_thread_runs(engine_pair, make_user):
    """The thread runs on A; tab B edits its first message: A forgets the turns after it (the
    echo counts from 1 again), both tabs drop them, and the edit is answered once."""
    a, b = engine_pair
    user = make_user()
    tab_a = await signed_in(a, user)
    await tab_a.start()
    first = await tab_a.send("one")
    thread_id = first["threadId"]
    await tab_a.send("two")
    await tab_a.wait_for(lambda c: "Echo #2: two" in c.replies(), timeout=20)
    assert await owner_pid(thread_id) == a.process.pid
    tab_b = await signed_in(b, user)
    await tab_b.start(thread_id=thread_id)
    await tab_b.wait_event("resume_thread")
    tab_a.events.clear()

    edited = await tab_b.call("edit_message", {"message": {"id": first["messageId"], "output": "uno"}})
    assert edited == {"threadId": thread_id, "messageId": first["messageId"]}, edited
    for tab in (tab_a, tab_b):
        await tab.wait_for(lambda c: "Echo #1: uno" in c.replies(), timeout=20)
    await asyncio.sleep(0.5)  # a second answer would have come by now
    assert tab_a.replies() == ["Echo #1: uno"], tab_a.events
    assert len(tab_a.named("delete_message")) == 4, tab_a.events  # one, its reply, two, its reply
    assert await transcript(thread_id) == [("user_message", "uno"), ("assistant_message", "Echo #1: uno")]
    assert await owner_pid(thread_id) == a.process.pid  # made there, and the thread stays there
    await tab_a.disconnect()
    await tab_b.disconnect()
