"""The Redis channel layer: this process's channels served without Redis, other processes'
through it, against a ``redis-server`` of the test's own (two layer instances stand for two
server processes)."""

import asyncio
import threading
from typing import Any

import pytest
import redis

from sessions_app.channel_layer import ResilientRedisChannelLayer


def make_layer(url: str) -> ResilientRedisChannelLayer:
    return ResilientRedisChannelLayer(hosts=[{"address": url}], capacity=1000)


def commands_run(url: str) -> int:
    """How many commands the Redis server ran so far (INFO's total_commands_processed)."""
    return int(redis.Redis.from_url(url).info("stats")["total_commands_processed"])


async def receive(layer: ResilientRedisChannelLayer, channel: str) -> dict[str, Any]:
    return await asyncio.wait_for(layer.receive(channel), 5)


async def test_a_group_send_reaches_local_members_without_redis_and_remote_ones_through_it(private_redis):
    here, there = make_layer(private_redis.url), make_layer(private_redis.url)
    mine, also_mine, theirs = await here.new_channel(), await here.new_channel(), await there.new_channel()
    for layer, channel in ((here, mine), (here, also_mine), (there, theirs)):
        await layer.group_add("thread.x", channel)

    await here.group_send("thread.x", {"type": "thread.event", "n": 1})
    assert (await receive(here, mine))["n"] == 1
    assert (await receive(here, also_mine))["n"] == 1
    assert (await receive(there, theirs))["n"] == 1

    # Members only here: the message itself never goes to Redis (only the member lookup).
    await there.group_discard("thread.x", theirs)
    before = commands_run(private_redis.url)
    for n in range(50):
        await here.group_send("thread.x", {"type": "thread.event", "n": n})
    for n in range(50):
        assert (await receive(here, mine))["n"] == n
        assert (await receive(here, also_mine))["n"] == n
    assert commands_run(private_redis.url) - before <= 2 * 50 + 5

    await here.group_discard("thread.x", mine)
    await here.group_send("thread.x", {"type": "thread.event", "n": "after"})
    assert (await receive(here, also_mine))["n"] == "after"
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(here.receive(mine), 0.3)
    await here.flush()


async def test_a_send_to_a_local_channel_from_another_threads_loop_is_delivered(private_redis):
    """Signal handlers publish with ``async_to_sync`` from a thread of their own."""
    layer = make_layer(private_redis.url)
    channel = await layer.new_channel()
    waiting = asyncio.ensure_future(receive(layer, channel))
    await asyncio.sleep(0.05)  # the receive has started this loop's queues

    def from_another_thread() -> None:
        asyncio.run(layer.send(channel, {"type": "x", "from": "thread"}))

    worker = threading.Thread(target=from_another_thread)
    worker.start()
    worker.join()
    assert (await waiting)["from"] == "thread"
    await layer.flush()
