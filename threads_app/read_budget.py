"""How many transcript bytes a user may read: a per-user budget of bytes, shared by every read
of every process (history, bootstrap, ``resume_thread``).

Each read is within its own budget already (``transcript_budgets``), but nothing stopped one
user from repeating reads of a huge thread as fast as the server answers: every read of a few
megabytes costs the process tens of milliseconds of the interpreter, which every other user
of the process waits through. So a read is granted what it wants (its own budget) out of the
user's bucket: ``TRANSCRIPT_READ_BURST_BYTES``, refilled at
``TRANSCRIPT_READ_BYTES_PER_SECOND``; with the bucket empty a read still gets
``TRANSCRIPT_READ_FLOOR_BYTES``, so a page always shows the newest steps and its cursor
(``omittedBeforeSeq``, ``previous``) to read more later: reads shrink instead of failing, and
what a read did not use goes back into the bucket. With ``REDIS_URL`` the buckets live in
Redis (one script per grant or refund); otherwise in this process's memory. Redis being down
grants the whole read.
"""

import logging
import threading
import time

import redis
from django.conf import settings

from threads_app import redis_clients
from threads_app.token_bucket import REFILL

logger = logging.getLogger(__name__)

# After REFILL (ARGV burst, bytes per second), ARGV wanted, floor. Refills the bucket, grants
# at least the floor and at most what it holds (it may go into debt, down to minus a burst),
# returns the grant. A refund is a negative ``wanted`` (and floor).
GRANT = (
    REFILL
    + """
local wanted = tonumber(ARGV[3])
local floor = tonumber(ARGV[4])
local grant = math.max(floor, math.min(wanted, tokens))
tokens = math.min(burst, math.max(-burst, tokens - grant))
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(2 * burst / per_second * 1000) + 1000)
return grant
"""
)


def _granted(tokens: float, burst: int, wanted: int, floor: int) -> tuple[int, float]:
    grant = int(max(floor, min(wanted, tokens)))
    return grant, min(burst, max(-burst, tokens - grant))


class ReadBudget:
    """The read budgets of every user; ``grant`` before a read, ``refund`` what it left."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._memory: dict[str, tuple[float, float]] = {}

    def _adjust(self, user_id: int, wanted: int, floor: int) -> int:
        burst = settings.TRANSCRIPT_READ_BURST_BYTES
        per_second = settings.TRANSCRIPT_READ_BYTES_PER_SECOND
        if burst <= 0:
            return wanted  # switched off
        backend = redis_clients.configured()
        if backend is not None:
            key = redis_clients.key("read-bytes", str(user_id))
            try:
                return int(backend.sync_client().eval(GRANT, 1, key, burst, per_second, wanted, floor))
            except redis.RedisError as exc:
                logger.warning("read budget not checked, Redis is unavailable: %r", exc)
                return wanted
        now = time.monotonic()
        with self._lock:
            tokens, at = self._memory.get(str(user_id), (float(burst), now))
            tokens = min(burst, tokens + (now - at) * per_second)
            grant, tokens = _granted(tokens, burst, wanted, floor)
            self._memory[str(user_id)] = (tokens, now)
        return grant

    def grant(self, user_id: int, wanted: int) -> int:
        """The bytes the user's next read may carry: ``wanted`` when the bucket holds them,
        less (never under the floor) when it does not. Taken from the bucket now."""
        floor = min(wanted, settings.TRANSCRIPT_READ_FLOOR_BYTES)
        return self._adjust(user_id, wanted, floor)

    def refund(self, user_id: int, unused: int) -> None:
        """Give back what a read was granted and did not carry."""
        if unused > 0:
            self._adjust(user_id, -unused, -unused)

    def reset(self) -> None:
        """Fill every bucket again (tests)."""
        with self._lock:
            self._memory.clear()
        backend = redis_clients.configured()
        if backend is None:
            return
        client = backend.sync_client()
        keys = list(client.scan_iter(match=redis_clients.key("read-bytes", "*"), count=1000))
        if keys:
            client.delete(*keys)


read_budget = ReadBudget()
