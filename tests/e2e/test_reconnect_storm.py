"""A reconnect storm across two processes: 100 sessions, each forced to reconnect 20 times at
random moments (half of them in the middle of a reply), alternating between the processes,
all asking for event offsets. What each client received has no gap and no duplicate, every
reply arrived whole while the client was connected (live or replayed), and each chat started
once. Sized for a 2-core machine.
"""

import asyncio
import functools
import os
import random
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator

import pytest

from tests.apps.web_app import GREETING
from tests.support.client import user_cookie
from tests.support.event_evidence import describe, first_gap_or_repeat
from tests.support.offset_client import OffsetClient
from tests.support.server import LiveServer

# 2000 reconnects: the engine run took 100-110 s on a fast machine and over 180 s (the suite's
# default timeout) on a machine about 3x slower; each client's own waits stay bounded.
pytestmark = [pytest.mark.two_process, pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]

SESSIONS = 100
RECONNECTS = 20
WORDS = "w0 w1 w2 w3"
# What each kind of app is sent, and the reply it streams to the n-th message (from 1).
MESSAGES = {"hooks": "slowstream 4 0.03", "engine": f"!slow 0.03\n{WORDS}"}
REPLIES: dict[str, Callable[[int], str]] = {
    "hooks": lambda n: "t0 t1 t2 t3 ",
    "engine": lambda n: f"Echo #{n}: {WORDS}",
}
APPS = {"hooks": "tests.apps.lifecycle_app", "engine": "tests.apps.web_app"}


@pytest.fixture(scope="module", params=["hooks", "engine"])
def storm_pair(request, server_factory, tmp_path_factory) -> Iterator[tuple[str, LiveServer, LiveServer]]:
    kind = str(request.param)
    hook_log = server_factory.workdir / f"storm-hooks-{os.urandom(3).hex()}.jsonl"
    # Ten sessions per user send 200 messages in about a minute: the default send budget
    # (120/min) would refuse the last ones, which is not what this test is about.
    env = {
        "CHAT_APP": APPS[kind],
        "ECHO_STATE_DIR": str(tmp_path_factory.mktemp("storm-echo")),
        "SEND_THROTTLE_RATE": "2000/min",
    }
    a = server_factory.start(hook_log=hook_log, **env)
    b = server_factory.start(hook_log=hook_log, **env)
    yield kind, a, b
    a.stop()
    b.stop()


def started(client: OffsetClient, count: int) -> bool:
    return len(replies(client)) >= count


def whole(client: OffsetClient, kind: str, count: int) -> bool:
    texts = list(replies(client).values())
    return len(texts) >= count and all(text == REPLIES[kind](n) for n, text in enumerate(texts[:count], 1))


def replies(client: OffsetClient) -> dict[str, str]:
    """Reply id -> the text its stream tokens made."""
    texts: dict[str, str] = defaultdict(str)
    for event, data, _offset in client.events:
        if event == "stream_token":
            texts[data["id"]] += data["token"]
    return texts


async def storm_one(
    kind: str, index: int, servers: tuple[LiveServer, LiveServer], cookie: str, rng: random.Random
) -> tuple[OffsetClient, str]:
    """One session's storm; returns the client and, if it got stuck, where (the test then
    prints what it received)."""
    client = OffsetClient(servers[index % 2].url, cookie)
    step = "the first connect"
    try:
        await client.connect()
        for round_ in range(RECONNECTS):
            sent = round_ + 1
            step = f"round {sent}: the send"
            await client.send(MESSAGES[kind])
            if rng.random() < 0.5:
                # Mid-reply: after the first token of this reply, a random moment into it.
                step = f"round {sent}: the reply's first token"
                await client.wait(functools.partial(started, client, sent), timeout=60)
                await asyncio.sleep(rng.uniform(0, 0.08))
            else:
                step = f"round {sent}: the whole reply"
                await client.wait(functools.partial(whole, client, kind, sent), timeout=60)
                await asyncio.sleep(rng.uniform(0, 0.05))
            await client.close()
            client.url = servers[(index + round_ + 1) % 2].url  # the other process
            step = f"round {sent}: the reconnect to {client.url}"
            await client.connect()
        step = "the last replies"
        await client.wait(functools.partial(whole, client, kind, RECONNECTS), timeout=90)
    except Exception as exc:  # reported with the client's events, below
        return client, f"stuck at {step}: {type(exc).__name__}: {str(exc)[:200]}"
    return client, ""


async def test_a_reconnect_storm_across_two_processes_loses_and_repeats_no_event(storm_pair, make_user):
    kind, a, b = storm_pair
    users = [make_user() for _ in range(10)]
    cookies = [await user_cookie(a.url, user) for user in users]
    rng = random.Random(20261130)
    outcomes = await asyncio.gather(
        *(
            storm_one(kind, i, (a, b), cookies[i % len(cookies)], random.Random(rng.random()))
            for i in range(SESSIONS)
        )
    )
    clients = [client for client, _ in outcomes]

    expected = [REPLIES[kind](n) for n in range(1, RECONNECTS + 1)]
    failures: list[str] = []
    for client, stuck in outcomes:
        texts = list(replies(client).values())
        offsets = client.offsets()
        reasons = [stuck] if stuck else []
        if gap := first_gap_or_repeat(offsets):
            reasons.append(gap)
        if len(client.recoveries) != RECONNECTS + 1 or not all(r["recovered"] for r in client.recoveries[1:]):
            reasons.append(f"recoveries {client.recoveries}")
        if texts != expected:
            reasons.append("replies differ")
        if reasons:
            failures.append(
                describe(
                    client.session_id, client.events, got=texts, expected=expected, reason="; ".join(reasons)
                )
            )
    assert not failures, (
        f"{len(failures)} of {SESSIONS} sessions went wrong; the first 3:\n"
        + "\n".join(failures[:3])
        + f"\nwhat the servers logged:\n{a.complaints()}\n{b.complaints()}"
    )

    if kind == "hooks":  # both processes log to one file
        starts = Counter(h["session"] for h in a.hooks(hook="on_chat_start"))
        answered = Counter(h["session"] for h in a.hooks(hook="on_message"))
        assert all(answered[c.session_id] == RECONNECTS for c in clients)
    else:  # the app greets when a chat starts
        starts = Counter(
            c.session_id
            for c in clients
            for e, data, _ in c.events
            if e == "new_message" and data["output"] == GREETING
        )
    assert all(starts[c.session_id] == 1 for c in clients), [
        c.session_id for c in clients if starts[c.session_id] != 1
    ][:3]
    for client in clients:
        await client.close()
