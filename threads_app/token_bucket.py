"""A token bucket per key: the send budget every path of a user shares.

A bucket holds up to ``burst`` tokens and refills at ``per_second``; taking one either
succeeds or says how long until a token is there. With ``REDIS_URL`` the buckets live in Redis
and one script takes a token atomically (with Redis's clock, so every process counts alike);
the embedded default keeps them in this process's memory. Both are called from synchronous
code (DRF's throttles, on a request thread) and from the event loop (the chat socket), which
uses redis-py's asyncio client: no thread hop, and at most one round trip per send.

Redis being down must not fail a send: the bucket then lets it through and logs a warning.

A refusal is remembered in this process until the wait it named is over (``_Refusals``):
nothing can put a token back sooner (every process only takes), so a flood past the budget
is refused without a round trip to Redis per request.

In Redis, a process may take a few tokens at once (an allowance, ``_Allowances``: up to a tenth
of the burst, at most ``settings.BUDGET_ALLOWANCE``) and spend them without a round trip, so
most sends cost none. One take per key goes to Redis at a time in a process (``_Leases``): the
others wait for it and spend what it brought, so concurrent requests of one user (24 searches
at once) are never refused while the tokens they need sit in a lease taken beside them. A
process gives what it did not spend back when the user's socket leaves it (``agive_back``,
called on a disconnect), so a user whose reconnects alternate between processes is not refused
early for tokens stranded in the one they left. The rate across processes is never exceeded (a
token is spent once, wherever it was taken). An allowance that is not given back (its process
died, or the socket is still there) expires once the bucket would have refilled it: a user
sending through several processes at once may be refused up to ``allowance - 1`` tokens early
per other process.
"""

import asyncio
import contextlib
import logging
import threading
import time
from dataclasses import dataclass

import redis
import redis.asyncio
from django.conf import settings

from threads_app import redis_clients

logger = logging.getLogger(__name__)


# The start of every bucket script: KEYS[1] the bucket, ARGV[1] its burst, ARGV[2] its tokens
# per second; leaves ``tokens`` refilled up to ``now`` (Redis's clock).
REFILL = """
local burst = tonumber(ARGV[1])
local per_second = tonumber(ARGV[2])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1]) or burst
local at = tonumber(state[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - at) * per_second)
"""

# Takes up to ARGV[3] tokens. Returns {tokens taken, the milliseconds until a token is there
# when none was}.
TAKE = (
    REFILL
    + """
local granted = 0
local wait = 0
if tokens >= 1 then
    granted = math.min(tonumber(ARGV[3]), math.floor(tokens))
    tokens = tokens - granted
else
    wait = math.ceil((1 - tokens) / per_second * 1000)
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / per_second * 1000) + 1000)
return {granted, wait}
"""
)


# Puts ARGV[3] unspent tokens back (never above the burst).
GIVE_BACK = (
    REFILL
    + """
tokens = math.min(burst, tokens + tonumber(ARGV[3]))
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / per_second * 1000) + 1000)
return 0
"""
)


@dataclass(frozen=True)
class Rate:
    burst: int
    per_second: float

    @property
    def allowance(self) -> int:
        """How many tokens a process takes from Redis at once."""
        return max(1, min(settings.BUDGET_ALLOWANCE, self.burst // 10))

    @classmethod
    def parse(cls, rate: str | None) -> "Rate | None":
        """``"120/min"`` (DRF's notation: s, m, h, d): a burst of 120, refilled at 2 a second.
        None, "", "off" or "none": no limit."""
        if rate is None or rate.strip().lower() in {"", "off", "none"}:
            return None
        count, period = rate.split("/")
        seconds = {"s": 1, "m": 60, "h": 3600, "d": 86400}[period.strip()[0]]
        return cls(int(count), int(count) / seconds)


class _MemoryBuckets:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buckets: dict[str, tuple[float, float]] = {}

    def take(self, key: str, rate: Rate) -> float | None:
        now = time.monotonic()
        with self._lock:
            tokens, at = self._buckets.get(key, (rate.burst, now))
            tokens = min(rate.burst, tokens + (now - at) * rate.per_second)
            if tokens >= 1:
                self._buckets[key] = (tokens - 1, now)
                return None
            self._buckets[key] = (tokens, now)
            return (1 - tokens) / rate.per_second

    def clear(self) -> None:
        with self._lock:
            self._buckets.clear()


class _Refusals:
    """Keys refused a moment ago, each until its wait is over (for the rate it was refused
    at). Bounded: past ``MAX_KEYS`` the expired ones are dropped, and a refusal that still
    finds no room is simply not remembered (the next request asks the bucket)."""

    MAX_KEYS = 10_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._until: dict[str, tuple[float, Rate]] = {}

    def wait(self, key: str, rate: Rate) -> float | None:
        with self._lock:
            found = self._until.get(key)
        if found is None or found[1] != rate:
            return None
        left = found[0] - time.monotonic()
        return left if left > 0 else None

    def remember(self, key: str, rate: Rate, wait: float) -> None:
        now = time.monotonic()
        with self._lock:
            if len(self._until) >= self.MAX_KEYS:
                self._until = {k: v for k, v in self._until.items() if v[0] > now}
            if len(self._until) < self.MAX_KEYS:
                self._until[key] = (now + wait, rate)

    def clear(self) -> None:
        with self._lock:
            self._until.clear()


class _Allowances:
    """Tokens this process took from Redis and has not spent, per key, each until the bucket
    would have refilled them (then they are dropped: see the module's docstring)."""

    MAX_KEYS = 10_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._left: dict[str, tuple[int, float, Rate]] = {}

    def spend(self, key: str, rate: Rate) -> bool:
        """Spend one token of the key's allowance, if it has one (for this rate)."""
        with self._lock:
            found = self._left.get(key)
            if found is None:
                return False
            left, until, at_rate = found
            if at_rate != rate or time.monotonic() >= until:
                del self._left[key]
                return False
            if left <= 1:
                del self._left[key]
            else:
                self._left[key] = (left - 1, until, rate)
            return True

    def take_all(self, key: str, rate: Rate) -> int:
        """The key's unspent tokens (for this rate, still valid), no longer this process's."""
        with self._lock:
            found = self._left.pop(key, None)
        if found is None:
            return 0
        left, until, at_rate = found
        return left if at_rate == rate and time.monotonic() < until else 0

    def keep(self, key: str, rate: Rate, tokens: int) -> None:
        """``tokens`` taken from Redis, not yet spent."""
        if tokens <= 0:
            return
        now = time.monotonic()
        with self._lock:
            if len(self._left) >= self.MAX_KEYS:
                self._left = {k: v for k, v in self._left.items() if v[1] > now}
            found = self._left.get(key)
            if found is not None and found[2] == rate and found[1] > now:
                tokens += found[0]  # still held (only a lease in flight adds: see _Leases)
            if len(self._left) < self.MAX_KEYS:
                self._left[key] = (tokens, now + tokens / rate.per_second, rate)

    def clear(self) -> None:
        with self._lock:
            self._left.clear()


class _Lease:
    """One take from Redis in flight: request threads wait on it with ``wait``, the event
    loop with ``until_done``; ``finish`` wakes both (from either side, without blocking)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._futures: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def wait(self) -> None:
        self._done.wait(_Leases.WAIT)

    async def until_done(self) -> None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if self._done.is_set():
                return
            self._futures.append((loop, future))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(future, _Leases.WAIT)

    def finish(self) -> None:
        with self._lock:
            self._done.set()
            futures, self._futures = self._futures, []
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        for loop, future in futures:
            if loop is running:  # no wake-up write to the loop's own self-pipe
                loop.call_soon(_resolve, future)
                continue
            with contextlib.suppress(RuntimeError):  # that loop has closed
                loop.call_soon_threadsafe(_resolve, future)


def _resolve(future: "asyncio.Future[None]") -> None:
    if not future.done():
        future.set_result(None)


class _Leases:
    """The takes from Redis in flight in this process, one per key: a caller that finds the
    allowance empty either leads the key's next take (``begin`` answers None; it must call
    ``end`` once the tokens are kept) or waits for the one in flight and looks again."""

    # How long a caller waits for another's take before looking again (a take is one round
    # trip; this only bounds a stuck one).
    WAIT = 2.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._in_flight: dict[str, _Lease] = {}

    def begin(self, key: str) -> _Lease | None:
        with self._lock:
            found = self._in_flight.get(key)
            if found is None:
                self._in_flight[key] = _Lease()
            return found

    def end(self, key: str) -> None:
        with self._lock:
            lease = self._in_flight.pop(key, None)
        if lease is not None:
            lease.finish()

    def clear(self) -> None:
        with self._lock:
            leases, self._in_flight = list(self._in_flight.values()), {}
        for lease in leases:
            lease.finish()


class TokenBucket:
    """The buckets of one budget (``name``), one per key (a user)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._memory = _MemoryBuckets()
        self._refusals = _Refusals()
        self._allowances = _Allowances()
        self._leases = _Leases()

    def _refused(self, key: str, rate: Rate, wait: float | None) -> float | None:
        if wait is not None:
            self._refusals.remember(key, rate, wait)
        return wait

    def _taken(self, key: str, rate: Rate, answer: list[int]) -> float | None:
        """What ``TAKE`` answered: one token spent now, the rest kept; or the wait."""
        granted, wait = int(answer[0]), int(answer[1])
        if granted:
            self._allowances.keep(key, rate, granted - 1)
            return None
        return self._refused(key, rate, wait / 1000)

    def _key(self, key: str) -> str:
        return redis_clients.key("bucket", self.name, key)

    def take(self, key: str, rate: Rate) -> float | None:
        """Take a token: None, or the seconds until one is there."""
        known = self._refusals.wait(key, rate)
        if known is not None:
            return known
        backend = redis_clients.configured()
        if backend is None:
            return self._refused(key, rate, self._memory.take(key, rate))
        while True:
            if self._allowances.spend(key, rate):
                return None
            in_flight = self._leases.begin(key)
            if in_flight is None:
                break  # this call leads the key's next take from Redis
            in_flight.wait()
            known = self._refusals.wait(key, rate)  # the take waited for was refused
            if known is not None:
                return known
        try:
            answer = backend.sync_client().eval(
                TAKE, 1, self._key(key), rate.burst, rate.per_second, rate.allowance
            )
            return self._taken(key, rate, answer)  # kept before the waiters look again
        except redis.RedisError as exc:
            logger.warning("%s budget not checked, Redis is unavailable: %r", self.name, exc)
            return None
        finally:
            self._leases.end(key)

    def reset(self) -> None:
        """Fill every bucket of this budget again: the in-memory ones and this deployment's
        keys in Redis (tests: a database flushed between tests hands users' pks out again)."""
        self._memory.clear()
        self._refusals.clear()
        self._allowances.clear()
        self._leases.clear()
        backend = redis_clients.configured()
        if backend is None:
            return
        client = backend.sync_client()
        keys = list(client.scan_iter(match=self._key("*"), count=1000))
        if keys:
            client.delete(*keys)

    async def atake(self, key: str, rate: Rate) -> float | None:
        """``take`` from the event loop."""
        known = self._refusals.wait(key, rate)
        if known is not None:
            return known
        backend = redis_clients.configured()
        if backend is None:
            return self._refused(key, rate, self._memory.take(key, rate))
        while True:
            if self._allowances.spend(key, rate):
                return None
            in_flight = self._leases.begin(key)
            if in_flight is None:
                break  # this call leads the key's next take from Redis
            await in_flight.until_done()
            known = self._refusals.wait(key, rate)  # the take waited for was refused
            if known is not None:
                return known
        try:
            answer = await backend.async_client().eval(
                TAKE, 1, self._key(key), rate.burst, rate.per_second, rate.allowance
            )
            return self._taken(key, rate, answer)  # kept before the waiters look again
        except (redis.RedisError, OSError) as exc:
            logger.warning("%s budget not checked, Redis is unavailable: %r", self.name, exc)
            return None
        finally:
            self._leases.end(key)

    async def agive_back(self, key: str, rate: Rate) -> None:
        """Return the key's unspent allowance to Redis (nothing to do, no round trip, when
        this process holds none)."""
        tokens = self._allowances.take_all(key, rate)
        backend = redis_clients.configured()
        if not tokens or backend is None:
            return
        try:
            await backend.async_client().eval(
                GIVE_BACK, 1, self._key(key), rate.burst, rate.per_second, tokens
            )
        except (redis.RedisError, OSError) as exc:
            logger.warning("%s budget: %d tokens not given back: %r", self.name, tokens, exc)
