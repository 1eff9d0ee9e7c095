"""Redis clients of this process for one URL: one blocking client, and one asyncio client per
event loop (redis-py's asyncio connections belong to the loop that opened them; daphne runs
one loop, tests run many). ``configured()`` gives those of ``REDIS_URL``, ``key()`` names a key
of this deployment."""

import asyncio
import threading
import weakref

import redis
import redis.asyncio
from django.conf import settings

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


_lock = threading.Lock()
_by_url: dict[str, RedisClients] = {}


def configured() -> RedisClients | None:
    """The clients of ``REDIS_URL``; None without it (the embedded default: no Redis)."""
    url = getattr(settings, "REDIS_URL", "")
    if not url:
        return None
    with _lock:
        clients = _by_url.get(url)
        if clients is None:
            clients = _by_url[url] = RedisClients(url)
        return clients


def key(*parts: str) -> str:
    """A Redis key of this deployment: under the cache's ``KEY_PREFIX``, which each deployment
    sharing a Redis (and each test run) has of its own."""
    prefix = str(settings.CACHES["default"].get("KEY_PREFIX", "tether"))
    return ":".join((prefix, *parts))
