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
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.client import user_cookie
from tests.support.offset_client import OffsetClient
from tests.support.server import LiveServer

pytestmark = [pytest.mark.two_process, pytest.mark.django_db(transaction=True)]

SESSIONS = 100
RECONNECTS = 20
TOKENS = 4
REPLY = "".join(f"t{i} " for i in range(TOKENS))
MESSAGE = f"slowstream {TOKENS} 0.03"


@pytest.fixture(scope="module")
def storm_pair(server_factory) -> Iterator[tuple[LiveServer, LiveServer]]:
    hook_log = server_factory.workdir / f"storm-hooks-{os.urandom(3).hex()}.jsonl"
    a = server_factory.start(hook_log=hook_log)
    b = server_factory.start(hook_log=hook_log)
    yield a, b
    a.stop()
    b.stop()


def started(client: OffsetClient, count: int) -> bool:
    return len(replies(client)) >= count


def whole(client: OffsetClient, count: int) -> bool:
    return sum(text == REPLY for text in replies(client).values()) >= count


def replies(client: OffsetClient) -> dict[str, str]:
    """Reply id -> the text its stream tokens made."""
    texts: dict[str, str] = defaultdict(str)
    for event, data, _offset in client.events:
        if event == "stream_token":
            texts[data["id"]] += data["token"]
    return texts


async def storm_one(
    index: int, servers: tuple[LiveServer, LiveServer], cookie: str, rng: random.Random
) -> OffsetClient:
    client = OffsetClient(servers[index % 2].url, cookie)
    await client.connect()
    for round_ in range(RECONNECTS):
        await client.send(MESSAGE)
        sent = round_ + 1
        if rng.random() < 0.5:
            # Mid-reply: after the first token of this reply, a random moment into it.
            await client.wait(functools.partial(started, client, sent), timeout=60)
            await asyncio.sleep(rng.uniform(0, 0.08))
        else:
            await client.wait(functools.partial(whole, client, sent), timeout=60)
            await asyncio.sleep(rng.uniform(0, 0.05))
        await client.close()
        client.url = servers[(index + round_ + 1) % 2].url  # the other process
        await client.connect()
    await client.wait(functools.partial(whole, client, RECONNECTS), timeout=90)
    return client


async def test_a_reconnect_storm_across_two_processes_loses_and_repeats_no_event(storm_pair, make_user):
    a, b = storm_pair
    users = [make_user() for _ in range(10)]
    cookies = [await user_cookie(a.url, user) for user in users]
    rng = random.Random(20261130)
    clients = await asyncio.gather(
        *(
            storm_one(i, (a, b), cookies[i % len(cookies)], random.Random(rng.random()))
            for i in range(SESSIONS)
        )
    )

    gaps: dict[str, Any] = {}
    for client in clients:
        offsets = client.offsets()
        twice = [o for o, n in Counter(offsets).items() if n > 1]
        missing = sorted(set(range(1, max(offsets) + 1)) - set(offsets))
        if twice or missing:
            gaps[client.session_id] = {"twice": twice[:5], "missing": missing[:5]}
        assert len(client.recoveries) == RECONNECTS + 1
        assert all(r["recovered"] for r in client.recoveries[1:]), client.recoveries
        texts = list(replies(client).values())
        assert texts == [REPLY] * RECONNECTS, texts
    assert not gaps, f"{len(gaps)} sessions saw a gap or a duplicate: {list(gaps.items())[:3]}"

    starts = Counter(h["session"] for h in a.hooks(hook="on_chat_start"))
    assert all(starts[c.session_id] == 1 for c in clients), [
        c.session_id for c in clients if starts[c.session_id] != 1
    ][:3]
    answered = Counter(h["session"] for h in a.hooks(hook="on_message"))
    assert all(answered[c.session_id] == RECONNECTS for c in clients)
    for client in clients:
        await client.close()
