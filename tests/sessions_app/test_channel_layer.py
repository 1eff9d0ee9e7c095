"""The Redis channel layer: this process's channels served without Redis, other processes'
through it, against a ``redis-server`` of the test's own (two layer instances stand for two
server processes)."""

import asyncio
import threading
from typing import Any

import pytest
import redis

from sessions_app.channel_layer import ResilientRedisChannelLayer
from sessions_app.group_leases import MARKER_KEY


def make_layer(url: str, lease: float = 1.0) -> ResilientRedisChannelLayer:
    return ResilientRedisChannelLayer(hosts=[{"address": url}], capacity=1000, group_lease=lease)


def up_for_long(url: str) -> None:
    """Date the server's lease records long ago: a fresh server makes every join wait out a
    lease, in case the server lost leases still trusted (``group_leases``)."""
    redis.Redis.from_url(url).set(f"asgi:{MARKER_KEY}", 0)


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


async def test_a_group_with_no_member_elsewhere_is_sent_to_without_redis_until_one_joins(private_redis):
    """After one read of the members, sends to a group whose members are all here cost no Redis
    command; a join elsewhere returns only once this process stopped trusting that, so the very
    next send reaches the new member (a lease of 30 s: the join did not wait it out)."""
    up_for_long(private_redis.url)
    here, there = make_layer(private_redis.url, lease=30.0), make_layer(private_redis.url, lease=30.0)
    mine, theirs = await here.new_channel(), await there.new_channel()
    await here.group_add("thread.y", mine)
    await here.group_send("thread.y", {"type": "thread.event", "n": -1})  # reads, takes the lease
    before = commands_run(private_redis.url)
    for n in range(50):
        await here.group_send("thread.y", {"type": "thread.event", "n": n})
    used = commands_run(private_redis.url) - before
    assert used <= 2, f"{used} Redis commands for 50 sends to local members only"
    for n in range(-1, 50):
        assert (await receive(here, mine))["n"] == n

    started = asyncio.get_running_loop().time()
    await asyncio.wait_for(there.group_add("thread.y", theirs), 5)
    joined_in = asyncio.get_running_loop().time() - started
    assert joined_in < 5, f"the join waited {joined_in:.1f}s: the lease was not broken"
    await here.group_send("thread.y", {"type": "thread.event", "n": "after the join"})
    assert (await receive(there, theirs))["n"] == "after the join"
    assert (await receive(here, mine))["n"] == "after the join"
    # With a member elsewhere, every send reads the members again.
    before = commands_run(private_redis.url)
    await here.group_send("thread.y", {"type": "thread.event", "n": "again"})
    assert commands_run(private_redis.url) - before >= 2
    assert (await receive(there, theirs))["n"] == "again"
    await here.flush()


async def test_a_join_waits_out_the_lease_of_a_holder_that_never_answers(private_redis):
    """A dead holder (a process killed while it held a lease) cannot confirm: the join returns
    once its lease is over, and not before."""
    up_for_long(private_redis.url)
    there = make_layer(private_redis.url)
    theirs = await there.new_channel()
    server = redis.Redis.from_url(private_redis.url)
    seconds, micros = server.time()
    server.zadd("asgi:leases:thread.z", {"0123456789abcdef": seconds * 1000 + micros // 1000 + 1000})
    started = asyncio.get_running_loop().time()
    await there.group_add("thread.z", theirs)
    waited = asyncio.get_running_loop().time() - started
    assert 0.8 < waited < 3, f"the join waited {waited:.2f}s for a 1 s lease held by a silent process"
    await there.flush()


async def test_a_join_after_redis_lost_its_data_waits_out_leases_it_may_have_held(private_redis):
    """FLUSHALL (or a restart without persistence) loses the leases' records while their holder
    still trusts them: a join then waits until any such lease is over."""
    up_for_long(private_redis.url)
    here, there = make_layer(private_redis.url, lease=1.0), make_layer(private_redis.url, lease=1.0)
    mine, theirs = await here.new_channel(), await there.new_channel()
    await here.group_add("thread.w", mine)
    await here.group_send("thread.w", {"type": "thread.event", "n": 0})
    assert here.leases.trusts("thread.w")
    redis.Redis.from_url(private_redis.url).flushall()
    started = asyncio.get_running_loop().time()
    await there.group_add("thread.w", theirs)
    waited = asyncio.get_running_loop().time() - started
    assert waited > 0.7, f"the join returned after {waited:.2f}s while a lost lease could still be trusted"
    await here.group_send("thread.w", {"type": "thread.event", "n": "after"})
    assert (await receive(there, theirs))["n"] == "after"
    await here.flush()


async def test_without_leases_every_send_reads_the_members(private_redis):
    here = make_layer(private_redis.url, lease=0)
    mine = await here.new_channel()
    await here.group_add("thread.v", mine)
    before = commands_run(private_redis.url)
    for n in range(10):
        await here.group_send("thread.v", {"type": "thread.event", "n": n})
    assert commands_run(private_redis.url) - before >= 10
    await here.flush()


async def test_a_group_send_leaves_out_the_members_of_another_group_here_and_elsewhere(private_redis):
    """A thread's bus leaves out the publishing session's own socket (``leave_out``: its
    session's group), which had the event directly: nothing for it goes through Redis, to be
    dropped there, while the thread's other sockets get every event. A group left out is no
    proof that the group has nobody elsewhere: no lease is taken on that."""
    up_for_long(private_redis.url)
    here, there = make_layer(private_redis.url, lease=30.0), make_layer(private_redis.url, lease=30.0)
    sender_here, moved_sender, other_tab = (
        await here.new_channel(),
        await there.new_channel(),
        await there.new_channel(),
    )
    for layer, channel, groups in (
        (here, sender_here, ("thread.z", "session.a")),
        (there, moved_sender, ("thread.z", "session.a")),
        (there, other_tab, ("thread.z",)),
    ):
        for group in groups:
            await layer.group_add(group, channel)

    for n in range(3):
        await here.group_send("thread.z", {"type": "thread.event", "n": n}, leave_out="session.a")
    assert [(await receive(there, other_tab))["n"] for _ in range(3)] == [0, 1, 2]
    for layer, channel in ((here, sender_here), (there, moved_sender)):
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(layer.receive(channel), 0.3)

    # Only the session's own socket elsewhere: no message for it in Redis, and still no lease.
    await there.group_discard("thread.z", other_tab)
    for n in range(3):
        await here.group_send("thread.z", {"type": "thread.event", "n": n}, leave_out="session.a")
    assert not here.leases.trusts("thread.z")
    assert not here.has_no_member_but("thread.z", "session.a")
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(there.receive(moved_sender), 0.3)
    await here.group_send("thread.z", {"type": "thread.event", "n": "to all"})
    assert (await receive(there, moved_sender))["n"] == "to all"
    await here.flush()
    await there.flush()


async def test_a_group_whose_members_are_all_left_out_here_is_known_without_redis(private_redis):
    """One tab on its thread: the thread's bus has no member but the session's own socket, which
    the layer knows from its lease with no Redis call (``has_no_member_but``)."""
    up_for_long(private_redis.url)
    layer = make_layer(private_redis.url, lease=30.0)
    sender = await layer.new_channel()
    for group in ("thread.w", "session.b"):
        await layer.group_add(group, sender)
    assert not layer.has_no_member_but("thread.w", "session.b"), "no lease yet: in doubt"
    await layer.group_send("thread.w", {"type": "thread.event"}, leave_out="session.b")  # takes the lease
    before = commands_run(private_redis.url)
    assert layer.has_no_member_but("thread.w", "session.b")
    assert not layer.has_no_member_but("thread.w", "session.other")
    used = commands_run(private_redis.url) - before
    assert used <= 2, f"{used} Redis commands to answer from the lease (INFO and the pump's own)"
    await layer.flush()


async def test_a_backlog_from_another_process_is_received_in_order_a_batch_per_round_trip(private_redis):
    """Messages queued for this process while its pump was busy arrive in order, and the pump
    takes them a batch per Redis round trip (channels-redis's receive took four round trips
    per message: a loaded process's inbox then drained at a few hundred a second and mailbox
    answers queued behind thread events arrived seconds late)."""
    here, there = make_layer(private_redis.url), make_layer(private_redis.url)
    mine = await here.new_channel()
    await here.group_add("thread.backlog", mine)
    # The pump starts with the first receive; the backlog is queued before it runs.
    for n in range(600):
        await there.send(mine, {"type": "thread.event", "n": n})
    before = commands_run(private_redis.url)
    got = [(await receive(here, mine))["n"] for _ in range(600)]
    taken = commands_run(private_redis.url) - before
    assert got == list(range(600)), got[:20]
    # 600 messages in batches of 200: three takes, one more finding the inbox empty and its
    # BZPOPMIN, and the INFO: channels-redis's receive would have run 2400 commands.
    assert taken <= 10, f"{taken} Redis commands to receive 600 messages"
    await here.flush()


async def test_a_batch_taken_but_not_delivered_is_received_by_the_next_pump(private_redis):
    """What a pump took from the inbox stays in its backup until the next take: a pump that
    died with a batch (its process's loop gone, its connection cut) leaves it to the next one,
    which puts it back in the inbox first."""
    from sessions_app.channel_layer import TAKE_BATCH

    here, there = make_layer(private_redis.url), make_layer(private_redis.url)
    mine = await here.new_channel()
    for n in range(3):
        await there.send(mine, {"type": "thread.event", "n": n})
    inbox = here.prefix + here.non_local_name(mine)
    backup = here._backup_channel_name(inbox)  # noqa: SLF001
    # A take whose answer never reached its pump: the three are in the backup only.
    taken = await here.connection(here.consistent_hash(inbox)).eval(TAKE_BATCH, 2, inbox, backup, 0, 200, 60)
    assert len(taken) == 6 and redis.Redis.from_url(private_redis.url).zcard(inbox) == 0
    got = [(await receive(here, mine))["n"] for _ in range(3)]
    assert got == [0, 1, 2], got
    await here.flush()
