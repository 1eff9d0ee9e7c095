"""Engine runs a user can make the server hold: bounded per box, closed when idle (the echo
engine's subprocesses, counted on a real daphne)."""

import asyncio
import contextlib
from pathlib import Path

import pytest
from django.conf import settings

from tests.support.client import ChatClient, login_cookie
from tests.support.latency import assert_others_unaffected, latency_probe
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.abuse, pytest.mark.django_db(transaction=True)]

RUNS_PER_BOX = 3


@pytest.fixture(scope="module")
def capped_server(server_factory, tmp_path_factory):
    return server_factory.start(
        CHAT_APP="sessions_app.default_app",
        ECHO_STATE_DIR=str(tmp_path_factory.mktemp("echo")),
        ENGINE_SESSIONS_PER_BOX=str(RUNS_PER_BOX),
        ENGINE_IDLE_TIMEOUT="2",
    )


def engine_processes(pid: int) -> int:
    """The server's live child processes (echo engine subprocesses)."""
    count = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            count += len((task / "children").read_text().split())
    return count


async def test_a_user_flooding_threads_gets_every_answer_from_a_bounded_number_of_runs(
    capped_server, make_user
):
    user = make_user()
    cookie = await login_cookie(capped_server.url, user.username, user.raw_password)
    clients = [ChatClient(capped_server.url, cookie) for _ in range(3 * RUNS_PER_BOX)]
    for client in clients:
        await client.start()  # each its own session, so each send opens a thread of its own
    peak = 0

    async def watch() -> None:
        nonlocal peak
        while True:
            peak = max(peak, engine_processes(capped_server.process.pid))
            await asyncio.sleep(0.02)

    watcher = asyncio.create_task(watch())
    try:
        for i, client in enumerate(clients):
            await client.send(f"!slow 0.05\nthread {i} says hello")
        for i, client in enumerate(clients):
            await client.wait_text(f"Echo #1: thread {i} says hello", timeout=30)
    finally:
        watcher.cancel()
    assert 0 < peak <= RUNS_PER_BOX
    # Unused for ENGINE_IDLE_TIMEOUT: every run is closed; the conversations resume.
    await wait_until(lambda: engine_processes(capped_server.process.pid) == 0, timeout=15)
    await clients[0].send("again")
    await clients[0].wait_text("Echo #2: again", timeout=15)
    for client in clients:
        await client.disconnect()


THREADS = 45


@pytest.fixture(scope="module")
def default_caps_server(server_factory, tmp_path_factory):
    """The default caps (32 runs a box); idle runs close soon after the test."""
    return server_factory.start(
        CHAT_APP="sessions_app.default_app",
        ECHO_STATE_DIR=str(tmp_path_factory.mktemp("echo-default-caps")),
        ENGINE_IDLE_TIMEOUT="20",
        # 45 sends a round, repeated as long as the probe measures (up to three comparisons):
        # more than the default send budget (120) at a quiet machine's pace. Budgets have
        # their own tests; these measure the engine pool.
        SEND_THROTTLE_RATE="10000/min",
    )


async def test_45_slow_threads_of_one_user_run_in_a_bounded_pool_and_cost_others_little(
    default_caps_server, make_user
):
    """The issue's 45 threads each running ``!slow 1`` (3 s a reply): at most
    ``ENGINE_SESSIONS_PER_BOX`` (32) engine subprocesses for the user, every thread answered,
    and another user's messages answered about as fast while the runs start and stream."""
    server = default_caps_server
    user = make_user()
    cookie = await login_cookie(server.url, user.username, user.raw_password)
    clients = [ChatClient(server.url, cookie) for _ in range(THREADS)]
    for client in clients:
        await client.start()  # each its own session: each send opens a thread of its own
    peak, runs = 0, 0

    async def slow_threads() -> None:
        nonlocal peak, runs
        runs += 1
        for i, client in enumerate(clients):
            answer = await client.send(f"!slow 1\nr{runs}t{i}")
            assert "error" not in answer, (runs, i, answer)
        answered = asyncio.gather(
            *(
                client.wait_for(lambda c, text=f"r{runs}t{i}": any(r.endswith(text) for r in c.replies()), 60)
                for i, client in enumerate(clients)
            )
        )
        while not answered.done():
            peak = max(peak, engine_processes(server.process.pid))
            await asyncio.sleep(0.05)
        await answered

    async with latency_probe(server, make_user()) as probe:
        await assert_others_unaffected(
            probe, slow_threads, f"{THREADS} threads of !slow 1", rounds=20, spacing=0.4, blocks=2
        )
    assert peak <= settings.ENGINE_SESSIONS_PER_BOX + 1  # the user's runs, and the probe's own
    for client in clients:
        await client.disconnect()
