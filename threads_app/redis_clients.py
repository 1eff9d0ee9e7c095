"""Redis clients of this process for one URL: one blocking client, and one asyncio client per
event loop (redis-py's asyncio connections belong to the loop that opened them; daphne runs
one loop, tests run many)."""

import asyncio
import threading
import weakref

import redis
import redis.asyncio

TIMEOUT = 2.0  # seconds to connect and to wait for an answer: a stuck Redis fails fast


class RedisClients:
    def __init__(self, url: str) -> None:
        self.url = url
        self._lock = threading.Lock()
        self._sync: redis.Redis | None = None
        self._async: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, redis.asyncio.Redis] = (
            weakref.WeakKeyDictionary()
        )

    def sync_client(self) -> "redis.Redis":
        with self._lock:
            if self._sync is None:
                self._sync = redis.Redis.from_url(
                    self.url, socket_timeout=TIMEOUT, socket_connect_timeout=TIMEOUT
                )
            return self._sync

    def async_client(self) -> "redis.asyncio.Redis":
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._async.get(loop)
            if client is None:
                client = self._async[loop] = redis.asyncio.Redis.from_url(
                    self.url, socket_timeout=TIMEOUT, socket_connect_timeout=TIMEOUT
                )
            return client
