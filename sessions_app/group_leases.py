"""Leases on "no member of this group is in another process", so that a ``group_send`` whose
members are all here (one tab on a thread, the usual case) costs no Redis round trip.

A process that reads a group's members in Redis and finds none elsewhere takes a lease on the
group in the same script (``READ_MEMBERS``): a join cannot slip between the read and the lease.
For ``LEASE_SECONDS`` it then delivers that group's messages to its own members only.

A join breaks every lease before it returns. ``JOIN`` adds the member and reads the group's live
leases in one script; the joiner tells each holder, on the holder's control channel, to forget
its lease, and waits until each holder confirmed it (or its lease ran out: a dead holder never
answers). A holder forgets on the message, and refuses to trust a read that was in flight while
any break arrived, so its next send reads Redis and finds the new member. So a socket whose
join finished gets every message sent to the group after that, from any process, which is what
a socket that joins and then reads the history relies on (``replay``, the resume path).

Redis losing its data (a restart without persistence, a flush) loses the leases with it. Each
Redis server keeps the time its lease records began (``MARKER_KEY``, written by whichever script
finds it missing); a join within ``LEASE_SECONDS`` of that time also waits out that remainder,
because leases taken before it may still be trusted. A holder whose receive from Redis failed
forgets all its leases at once as well.
"""

import asyncio
import time
import uuid
from dataclasses import dataclass, field

LEASE_SECONDS = 1.0
# A holder stops trusting a lease this much before Redis lets it expire.
LEASE_MARGIN = 0.05
MARKER_KEY = "leases-began"

# KEYS: group, leases, marker, and optionally a group whose members are left out. ARGV: oldest
# member score kept, this process's channel prefix, this process's holder id, the lease in ms
# (0: take none). Returns how many members the group has elsewhere, then those of them not in
# the left-out group; a lease was taken when there are none elsewhere.
READ_MEMBERS = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], 0, ARGV[1])
local prefix = ARGV[2]
local left_out = {}
if #KEYS > 3 then
    for _, member in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do
        left_out[member] = true
    end
end
local elsewhere = 0
local remote = {}
for _, member in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
    if string.sub(member, 1, #prefix) ~= prefix then
        elsewhere = elsewhere + 1
        if not left_out[member] then
            remote[#remote + 1] = member
        end
    end
end
local lease = tonumber(ARGV[4])
if elsewhere == 0 and lease > 0 then
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    if redis.call('EXISTS', KEYS[3]) == 0 then
        redis.call('SET', KEYS[3], now)
    end
    redis.call('ZADD', KEYS[2], now + lease, ARGV[3])
    redis.call('PEXPIRE', KEYS[2], lease)
end
table.insert(remote, 1, elsewhere)
return remote
"""

# KEYS: group, leases, marker. ARGV: the channel, its score, the group expiry (s), this
# process's holder id, the lease in ms. Returns the ms left before leases older than the marker
# are over, then (holder, ms left) for every other live lease.
JOIN = """
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local began = tonumber(redis.call('GET', KEYS[3]))
if began == nil then
    began = now
    redis.call('SET', KEYS[3], now)
end
local out = {tostring(began + tonumber(ARGV[5]) - now)}
local leases = redis.call('ZRANGEBYSCORE', KEYS[2], now + 1, '+inf', 'WITHSCORES')
for i = 1, #leases, 2 do
    if leases[i] ~= ARGV[4] then
        out[#out + 1] = leases[i]
        out[#out + 1] = tostring(tonumber(leases[i + 1]) - now)
    end
end
return out
"""

BREAK = "layer.lease.break"
BROKEN = "layer.lease.broken"


@dataclass
class GroupLeases:
    """One process's leases (group -> monotonic time it stops trusting the lease) and the
    breaks it waits for. Owned by the channel layer; ``forget_all`` resets it."""

    seconds: float = LEASE_SECONDS
    trusted: dict[str, float] = field(default_factory=dict)
    # Bumped by every break: a read that saw a bump while in flight takes no lease.
    breaks: int = 0
    waiting: dict[str, asyncio.Future[None]] = field(default_factory=dict)

    @property
    def enabled(self) -> bool:
        return self.seconds > 0

    @property
    def milliseconds(self) -> int:
        return int(self.seconds * 1000)

    def trusts(self, group: str) -> bool:
        """Whether ``group`` is known to have no member in another process."""
        until = self.trusted.get(group)
        if until is None:
            return False
        if time.monotonic() < until:
            return True
        del self.trusted[group]
        return False

    def took(self, group: str, started: float, breaks_then: int) -> None:
        """A read begun at ``started`` (monotonic) found nobody elsewhere and took a lease."""
        if breaks_then == self.breaks:
            self.trusted[group] = started + self.seconds - LEASE_MARGIN

    def forget(self, group: str) -> None:
        self.breaks += 1
        self.trusted.pop(group, None)

    def forget_all(self) -> None:
        self.breaks += 1
        self.trusted.clear()

    def drop_expired(self) -> None:
        now = time.monotonic()
        for group in [g for g, until in self.trusted.items() if until <= now]:
            del self.trusted[group]

    def expect_confirmation(self) -> tuple[str, asyncio.Future[None]]:
        token = uuid.uuid4().hex
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiting[token] = future
        return token, future

    def confirmed(self, token: str) -> None:
        future = self.waiting.pop(token, None)
        if future is not None and not future.done():
            future.set_result(None)

    def reset(self) -> None:
        """A new event loop (tests): the old loop's waits are dead."""
        self.forget_all()
        self.waiting.clear()
