"""A token bucket per key: the send budget every path of a user shares.

A bucket holds up to ``burst`` tokens and refills at ``per_second``; taking one either
succeeds or says how long until a token is there. With ``REDIS_URL`` the buckets live in Redis
and one script takes a token atomically (with Redis's clock, so every process counts alike);
the embedded default keeps them in this process's memory. Both are called from synchronous
code (DRF's throttles, on a request thread) and from the event loop (the chat socket), which
uses redis-py's asyncio client: no thread hop and one round trip per send.

Redis being down must not fail a send: the bucket then lets it through and logs a warning.
"""

import logging
import threading
import time
from dataclasses import dataclass

import redis
import redis.asyncio

from threads_app import redis_clients

logger = logging.getLogger(__name__)

# KEYS[1] the bucket; ARGV burst, tokens per second. Returns 0 (taken) or the milliseconds
# until a token is there.
TAKE = """
local burst = tonumber(ARGV[1])
local per_second = tonumber(ARGV[2])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1]) or burst
local at = tonumber(state[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - at) * per_second)
local wait = 0
if tokens >= 1 then
    tokens = tokens - 1
else
    wait = math.ceil((1 - tokens) / per_second * 1000)
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / per_second * 1000) + 1000)
return wait
"""


@dataclass(frozen=True)
class Rate:
    burst: int
    per_second: float

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


class TokenBucket:
    """The buckets of one budget (``name``), one per key (a user)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._memory = _MemoryBuckets()

    def _key(self, key: str) -> str:
        return redis_clients.key("bucket", self.name, key)

    def take(self, key: str, rate: Rate) -> float | None:
        """Take a token: None, or the seconds until one is there."""
        backend = redis_clients.configured()
        if backend is None:
            return self._memory.take(key, rate)
        try:
            wait = int(backend.sync_client().eval(TAKE, 1, self._key(key), rate.burst, rate.per_second))
        except redis.RedisError as exc:
            logger.warning("%s budget not checked, Redis is unavailable: %r", self.name, exc)
            return None
        return wait / 1000 if wait else None

    def reset(self) -> None:
        """Fill every bucket of this budget again: the in-memory ones and this deployment's
        keys in Redis (tests: a database flushed between tests hands users' pks out again)."""
        self._memory.clear()
        backend = redis_clients.configured()
        if backend is None:
            return
        client = backend.sync_client()
        keys = list(client.scan_iter(match=self._key("*"), count=1000))
        if keys:
            client.delete(*keys)

    async def atake(self, key: str, rate: Rate) -> float | None:
        """``take`` from the event loop."""
        backend = redis_clients.configured()
        if backend is None:
            return self._memory.take(key, rate)
        try:
            wait = int(
                await backend.async_client().eval(TAKE, 1, self._key(key), rate.burst, rate.per_second)
            )
        except (redis.RedisError, OSError) as exc:
            logger.warning("%s budget not checked, Redis is unavailable: %r", self.name, exc)
            return None
        return wait / 1000 if wait else None
