"""One Redis connection pool per URL for the whole process.

Django builds a cache object (and with it a connection pool) per thread, and under ASGI every
sync request runs on a thread of its own, so each request opened a new Redis connection.
Handing every cache object the same pool keeps the connection count flat.
"""

import threading
from typing import Any

import redis


class SharedConnectionPool(redis.ConnectionPool):
    # The lock of _pools, on the class; each pool still gets its own RLock in reset().
    _lock = threading.Lock()  # type: ignore[assignment]
    _pools: dict[tuple[str, tuple[tuple[str, Any], ...]], redis.ConnectionPool] = {}

    @classmethod
    def from_url(cls, url: str, **options: Any) -> redis.ConnectionPool:  # type: ignore[override]  # the shared pool, not a cls
        key = (url, tuple(sorted(options.items())))
        with cls._lock:
            pool = cls._pools.get(key)
            if pool is None:
                pool = cls._pools[key] = redis.ConnectionPool.from_url(url, **options)
            return pool
