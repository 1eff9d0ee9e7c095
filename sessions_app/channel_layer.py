"""A channels-redis layer whose consumers survive Redis outages and never lose a message to
another consumer's cancellation.

channels-redis receives for every process-specific channel (``specific.<prefix>!<id>``) with
one ``BZPOPMIN`` at a time, done by whichever consumer's ``receive()`` holds its receive lock,
and hands what arrives to the other consumers' buffers. Two things follow:

- when Redis is down (or a pooled connection went stale after a restart) the exception is
  raised in the consumer holding the lock; Channels then ends that consumer, so each
  WebSocket of the process is closed in turn as its consumer takes the lock;
- a consumer that leaves (its receive is cancelled) while it holds the lock interrupts the
  shared receive for everybody, and the cleaner of the message's backup copy may be
  cancelled with it (channels-redis notes that this can deliver a message twice).

Here one task per process and event loop does the receiving for all process-specific
channels, retrying with a short backoff while Redis is away, and delivers into per-channel
queues; a consumer's ``receive()`` only waits on its own queue, so cancelling it cancels
nothing shared. Normal (non-``!``) channels, like a process's mailbox reply channel, are
received as channels-redis does, retried on connection errors. Sends and group operations
still raise on errors: their callers decide (``emitter``, ``thread_bus``, ``consumers``).

A message for a channel of this process never goes through Redis: ``send`` puts it straight
into the channel's queue, and ``group_send`` delivers to the group's members in this process
(known from their ``group_add``) the same way, then sends through Redis only to members in
other processes, in one script per Redis connection. Finding those members is a Redis round
trip too, skipped while this process holds a lease saying the group has none elsewhere
(``group_leases``: a join elsewhere breaks the lease before it returns). Each Redis round trip
costs system calls
and a trip through the event loop, and channels-redis's own path (one shared inbox list per
process, with a capacity) drops group messages silently once a busy process falls behind
reading it; local members no longer depend on it, and a drop for a remote member is logged
as a warning. Receivers must not mutate a message: local members of one group share it.
A ``group_send`` may leave out the members of another group (``leave_out``, read in the same
script): a session's socket that had an event directly gets no copy of it on its thread's bus.
"""

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

from channels_redis.core import RedisChannelLayer

from sessions_app import metrics
from sessions_app.group_leases import (
    BREAK,
    BROKEN,
    JOIN,
    LEASE_SECONDS,
    MARKER_KEY,
    READ_MEMBERS,
    GroupLeases,
)

logger = logging.getLogger(__name__)

RETRY_FIRST = 0.1
RETRY_MAX = 2.0
# A queue nobody has read for this long belongs to a consumer that left: dropped.
ABANDONED_AFTER = 120.0
SWEEP_EVERY = 10.0

# Capacity-checked delivery of one message per key (KEYS; ARGV: the messages, then the
# capacities, then now and the message expiry). Returns how many keys were full.
DELIVER_TO_KEYS = """
local full = 0
local now = tonumber(ARGV[#ARGV - 1])
local expiry = tonumber(ARGV[#ARGV])
for i = 1, #KEYS do
    redis.call('ZREMRANGEBYSCORE', KEYS[i], 0, now - expiry)
    if redis.call('ZCOUNT', KEYS[i], '-inf', '+inf') < tonumber(ARGV[#KEYS + i]) then
        redis.call('ZADD', KEYS[i], now, ARGV[i])
        redis.call('EXPIRE', KEYS[i], expiry)
    else
        full = full + 1
    end
end
return full
"""


# This process's inbox (KEYS[1]) and its backup (KEYS[2]; ARGV: restore, batch size, the
# backup's expiry). The backup holds the batch the last call took, until this call: with
# ``restore`` (the pump starting, or retrying after an error: that batch may not have been
# delivered) it goes back to the inbox, else it was delivered and is dropped. Then up to a batch
# of the oldest messages move to the backup and are returned (member, score, ...), oldest first.
TAKE_BATCH = """
if ARGV[1] == '1' then
    local backed_up = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
    for i = 1, #backed_up, 2 do
        redis.call('ZADD', KEYS[1], backed_up[i + 1], backed_up[i])
    end
end
redis.call('DEL', KEYS[2])
local taken = redis.call('ZPOPMIN', KEYS[1], tonumber(ARGV[2]))
for i = 1, #taken, 2 do
    redis.call('ZADD', KEYS[2], taken[i + 1], taken[i])
end
if #taken > 0 then
    redis.call('EXPIRE', KEYS[2], tonumber(ARGV[3]))
end
return taken
"""
# How many messages one pump round trip takes at most.
RECEIVE_BATCH = 200


class Inbox:
    """The messages waiting for one channel's consumer, and that consumer's wait. An
    ``asyncio.Queue`` would do, at about 2 KiB per idle socket (four deques and an event)."""

    __slots__ = ("messages", "waiter")

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.waiter: asyncio.Future[None] | None = None

    def put(self, message: dict[str, Any]) -> None:
        self.messages.append(message)
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    async def get(self) -> dict[str, Any]:
        """The oldest message, once there is one (one consumer per channel). A cancelled wait
        leaves every message in place."""
        while not self.messages:
            self.waiter = asyncio.get_running_loop().create_future()
            try:
                await self.waiter
            finally:
                self.waiter = None
        return self.messages.pop(0)


class ResilientRedisChannelLayer(RedisChannelLayer):  # type: ignore[misc]  # channels_redis is untyped
    def __init__(self, *args: Any, group_lease: float = LEASE_SECONDS, **kwargs: Any) -> None:
        """``group_lease``: seconds a process trusts that a group has no member elsewhere
        (0: every group_send reads the members in Redis)."""
        super().__init__(*args, **kwargs)
        self.leases = GroupLeases(seconds=group_lease)
        self._pump_loop: asyncio.AbstractEventLoop | None = None
        self._pump: asyncio.Task[Any] | None = None
        self._queues: defaultdict[str, Inbox] = defaultdict(Inbox)
        self._last_read: dict[str, float] = {}
        self._swept = 0.0
        # Groups of this process's channels, from their group_add / group_discard.
        self._local_groups: defaultdict[str, set[str]] = defaultdict(set)
        self._mine = f"specific.{self.client_prefix}!"
        # Where other processes tell this one to break its leases, and confirm breaking theirs.
        self._control = self._mine + "leases"
        self._marker_key = f"{self.prefix}:{MARKER_KEY}"
        self._confirming: set[asyncio.Task[None]] = set()

    # --- this process's own channels ---------------------------------------------------------

    def _is_local(self, channel: str) -> bool:
        """A channel of a consumer of this process (served by this layer's queues)."""
        return channel.startswith(self._mine)

    def _deliver(self, channel: str, message: dict[str, Any]) -> None:
        pump_loop = self._pump_loop
        if pump_loop is not None and pump_loop is not asyncio.get_running_loop() and pump_loop.is_running():
            # Sent from another thread's loop (``async_to_sync`` in a signal handler): the
            # queues belong to the server's loop.
            pump_loop.call_soon_threadsafe(self._put, channel, message)
            return
        self._ensure_pump(self._mine)
        self._put(channel, message)

    def _put(self, channel: str, message: dict[str, Any]) -> None:
        self._queues[channel].put(message)
        self._last_read.setdefault(channel, time.monotonic())

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        if self._is_local(channel):
            assert self.require_valid_channel_name(channel)
            self._deliver(channel, dict(message))
            return
        try:
            await super().send(channel, message)
        except Exception:
            metrics.channel_layer_errors.labels("send").inc()
            raise

    async def group_add(self, group: str, channel: str) -> None:
        """Returns once every process that trusted the group to have no member elsewhere
        stopped trusting it (``group_leases``)."""
        try:
            await self._join(group, channel)
        except Exception:
            metrics.channel_layer_errors.labels("group_add").inc()
            raise
        if channel.startswith(self._mine):
            self._local_groups[group].add(channel)

    async def _join(self, group: str, channel: str) -> None:
        if not self.leases.enabled:
            await super().group_add(group, channel)
        else:
            assert self.require_valid_group_name(group), "Group name not valid"
            assert self.require_valid_channel_name(channel), "Channel name not valid"
            self._ensure_pump(self._mine)  # the holders' confirmations arrive through it
            index = self.consistent_hash(group)
            keys = (self._group_key(group), self._lease_key(group), self._marker_key)
            args = (channel, time.time(), self.group_expiry, self.client_prefix, self.leases.milliseconds)
            answer = await self.connection(index).eval(JOIN, len(keys), *keys, *args)
            await self._break_leases(group, int(answer[0]), answer[1:])

    def _lease_key(self, group: str) -> str:
        return f"{self.prefix}:leases:{group}"

    async def _break_leases(self, group: str, fresh_ms: int, holders: list[bytes]) -> None:
        """Tell each holder to forget its lease on ``group``; wait for its confirmation, or
        for its lease to run out."""
        waits: list[Awaitable[Any]] = []
        for holder, left_ms in zip(holders[::2], holders[1::2], strict=True):
            token, confirmed = self.leases.expect_confirmation()
            await super().send(
                f"specific.{holder.decode()}!leases",
                {"type": BREAK, "group": group, "token": token, "reply_to": self._control},
            )
            waits.append(self._confirmation(token, confirmed, int(left_ms) / 1000))
        if fresh_ms > 0:  # Redis's lease records are younger than a lease: older ones may be trusted
            waits.append(asyncio.sleep(fresh_ms / 1000))
        if waits:
            await asyncio.gather(*waits)

    async def _confirmation(self, token: str, confirmed: asyncio.Future[None], timeout: float) -> None:
        try:
            await asyncio.wait_for(confirmed, timeout)
        except TimeoutError:
            pass  # the lease is over: its holder, dead or slow, no longer trusts it
        finally:
            self.leases.waiting.pop(token, None)

    def _on_control(self, message: dict[str, Any]) -> None:
        """A lease break from a joiner elsewhere (forget at once, then confirm), or the
        confirmation of one this process asked for."""
        if message.get("type") == BREAK:
            self.leases.forget(message["group"])
            task = asyncio.get_running_loop().create_task(
                self._confirm(message["reply_to"], message["token"])
            )
            self._confirming.add(task)
            task.add_done_callback(self._confirming.discard)
        elif message.get("type") == BROKEN:
            self.leases.confirmed(message["token"])

    async def _confirm(self, reply_to: str, token: str) -> None:
        try:
            await super().send(reply_to, {"type": BROKEN, "token": token})
        except Exception as exc:  # the joiner waits its lease out instead
            logger.warning("lease break not confirmed to %s: %r", reply_to, exc)

    async def group_discard(self, group: str, channel: str) -> None:
        members = self._local_groups.get(group)
        if members is not None:
            members.discard(channel)
            if not members:
                del self._local_groups[group]
        try:
            await super().group_discard(group, channel)
        except Exception:
            metrics.channel_layer_errors.labels("group_discard").inc()
            raise

    async def group_send(self, group: str, message: dict[str, Any], *, leave_out: str | None = None) -> None:
        """Deliver ``message`` to the group's members; ``leave_out``: a group whose members
        get nothing (a thread's bus leaves out the publishing session's own socket, which had
        the event directly, wherever that socket is now), found in the same read as the rest."""
        assert self.require_valid_group_name(group), "Group name not valid"
        skipped = self._local_groups.get(leave_out, set()) if leave_out else set()
        local = [channel for channel in self._local_groups.get(group, ()) if channel not in skipped]
        if local:
            shared = dict(message)
            for channel in local:
                self._deliver(channel, shared)
        if self.leases.trusts(group) and self._pump_serves_this_loop():
            return
        try:
            remote = await self._remote_members(group, leave_out)
            if remote:
                await self._send_through_redis(group, remote, message)
        except Exception:
            metrics.channel_layer_errors.labels("group_send").inc()
            raise

    def has_no_member_but(self, group: str, leave_out: str) -> bool:
        """Whether ``group`` is known to have no member but those of ``leave_out``, anywhere:
        this process trusts its lease on the group and holds no other member of it. No Redis
        call; False whenever in doubt."""
        if not (self.leases.trusts(group) and self._pump_serves_this_loop()):
            return False
        return self._local_groups.get(group, set()) <= self._local_groups.get(leave_out, set())

    def _pump_serves_this_loop(self) -> bool:
        """Lease breaks are received by the pump: without it running here, trust nothing."""
        pump = self._pump
        return pump is not None and not pump.done() and self._pump_loop is asyncio.get_running_loop()

    async def _remote_members(self, group: str, leave_out: str | None = None) -> list[str]:
        """The group's members in other processes (but ``leave_out``'s), read in Redis; none
        elsewhere at all, and a lease is taken (when this loop can receive its breaks)."""
        lease = self.leases.enabled and self._pump_serves_this_loop()
        started, breaks_then = time.monotonic(), self.leases.breaks
        index = self.consistent_hash(group)
        keys: tuple[str, ...] = (self._group_key(group), self._lease_key(group), self._marker_key)
        if leave_out is not None and self.consistent_hash(leave_out) == index:  # one server holds both
            keys += (self._group_key(leave_out),)
        args = (int(time.time()) - self.group_expiry, self._mine, self.client_prefix)
        elsewhere, *members = await self.connection(index).eval(
            READ_MEMBERS, len(keys), *keys, *args, self.leases.milliseconds if lease else 0
        )
        if not elsewhere and lease:
            self.leases.took(group, started, breaks_then)
        return [member.decode() for member in members]

    async def flush(self) -> None:
        self.leases.forget_all()
        await super().flush()

    async def _send_through_redis(self, group: str, channels: list[str], message: dict[str, Any]) -> None:
        by_connection, payloads, capacities = self._map_channel_keys_to_connection(channels, message)
        for index, keys in by_connection.items():
            args = [payloads[k] for k in keys] + [capacities[k] for k in keys] + [time.time(), self.expiry]
            full = await self.connection(index).eval(DELIVER_TO_KEYS, len(keys), *keys, *args)
            if full:
                logger.warning(
                    "group %s: %s of %s channel keys full, message dropped for them", group, full, len(keys)
                )

    async def receive(self, channel: str) -> dict[str, Any]:
        assert self.require_valid_channel_name(channel)
        if "!" not in channel:
            return await self._retrying(super().receive, channel)
        self._ensure_pump(self.non_local_name(channel))
        self._last_read[channel] = time.monotonic()
        queue = self._queues[channel]
        message = await queue.get()
        self._last_read[channel] = time.monotonic()
        return message

    def _ensure_pump(self, real_channel: str) -> None:
        loop = asyncio.get_running_loop()
        if self._pump_loop is not loop or self._pump is None or self._pump.done():
            if self._pump_loop not in (None, loop):  # a new event loop (tests): the old one's queues are dead
                self._queues = defaultdict(Inbox)
                self._last_read = {}
                self._local_groups = defaultdict(set)
                self.leases.reset()
            self._pump_loop = loop
            self._pump = loop.create_task(self._receive_forever(real_channel))

    async def _receive_forever(self, real_channel: str) -> None:
        """Receive for every channel of this process, a batch per Redis round trip.

        channels-redis's ``receive_single`` takes four round trips per message (restore the
        backup, ``BZPOPMIN``, back it up, clean the backup): one process's inbox then drains at
        a few hundred messages a second on a loaded host, and under a burst (a reconnect storm,
        tokens for another process's tabs) everything queued behind, mailbox requests and their
        answers too, arrived seconds late. Here one script takes the backlog (``TAKE_BATCH``),
        with the same backup: a batch is dropped from it only by the next take, after it was
        delivered; what a failed or cancelled call may have taken goes back to the inbox. An
        empty inbox is waited on with ``BZPOPMIN`` as before."""
        delay = RETRY_FIRST
        channel_key = self.prefix + real_channel
        backup_key = self._backup_channel_name(channel_key)
        index = self.consistent_hash(real_channel)
        restore = True  # the last batch taken may not have been delivered
        while True:
            try:
                connection = self.connection(index)
                taken = await connection.eval(
                    TAKE_BATCH, 2, channel_key, backup_key, int(restore), RECEIVE_BATCH, self.expiry
                )
                restore = False
                contents = taken[::2]
                if not contents:
                    popped = await connection.bzpopmin(channel_key, timeout=self.brpop_timeout)
                    if popped is None:
                        continue
                    _, member, score = popped
                    await connection.zadd(backup_key, {member: float(score)})
                    contents = [member]
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                restore = True
                # Redis may be a new one that lost the leases' records: breaks may be missed.
                self.leases.forget_all()
                metrics.channel_layer_errors.labels("receive").inc()
                logger.warning("channel layer receive failed (%r); retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX)
                continue
            delay = RETRY_FIRST
            for content in contents:
                self._dispatch_received(self.deserialize(content), real_channel)
            self._drop_abandoned()

    def _dispatch_received(self, message: dict[str, Any], real_channel: str) -> None:
        """Put one message from the inbox into its channels' queues (channels-redis names them
        in ``__asgi_channel__``: one, or a list for several members here)."""
        target = message.pop("__asgi_channel__", real_channel)
        now = time.monotonic()
        for channel in target if isinstance(target, list) else [target]:
            if channel == self._control:
                self._on_control(message)
                continue
            self._queues[channel].put(message)
            self._last_read.setdefault(channel, now)

    def _drop_abandoned(self) -> None:
        now = time.monotonic()
        if now - self._swept < SWEEP_EVERY:
            return
        self._swept = now
        self.leases.drop_expired()
        for channel, last in list(self._last_read.items()):
            if now - last > ABANDONED_AFTER:
                queue = self._queues.get(channel)
                if queue is None or queue.waiter is None:  # nobody waits on it
                    self._queues.pop(channel, None)
                    self._last_read.pop(channel, None)
                    for members in self._local_groups.values():
                        members.discard(channel)

    async def _retrying(
        self, receive: Callable[[str], Awaitable[dict[str, Any]]], channel: str
    ) -> dict[str, Any]:
        delay = RETRY_FIRST
        while True:
            try:
                return await receive(channel)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                metrics.channel_layer_errors.labels("receive").inc()
                logger.warning("receive on %s failed (%r); retrying in %.1fs", channel, exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX)
