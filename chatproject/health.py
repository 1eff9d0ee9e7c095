"""Liveness and readiness of one server process: ``GET /healthz`` and ``GET /readyz``.

Several daphne processes stand behind one address (docs/several-processes.md), and
whatever balances them (a proxy with active checks, an orchestrator, a supervisor) asks each
process two different questions:

- ``/healthz``, liveness: does the process answer at all? It touches neither the database nor
  Redis, so an outage of a shared service does not get every process restarted at once.
- ``/readyz``, readiness: should new work come here? It runs ``SELECT 1`` on the database and
  ``PING`` on the channel layer's Redis (when ``REDIS_URL`` is set), concurrently and each
  within ``READINESS_TIMEOUT`` seconds, and answers 503 naming what failed. Once a graceful
  shutdown has begun (SIGTERM, ``sessions_app.shutdown``) it answers 503 at once: the
  process refuses new sockets while it drains, so it should get no new traffic.

Both are async views: the database check runs on a database thread, the Redis check on
redis.asyncio, so neither blocks the event loop that serves the sockets. They read no
session and no user (no cookie is set, no login is asked for), and GET needs no CSRF token.
The body says ``ok``, ``timeout`` or ``error`` per check and nothing more, since anyone who
can reach the address can read it; the exception goes to the log.
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import redis.asyncio
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from sessions_app.database import database_sync_to_async
from sessions_app.shutdown import is_draining

logger = logging.getLogger(__name__)

OK = "ok"
TIMEOUT = "timeout"
ERROR = "error"


@never_cache
@require_safe
async def healthz(request: HttpRequest) -> JsonResponse:
    """The process answers (liveness); nothing else is looked at."""
    return JsonResponse({"status": "ok"})


@never_cache
@require_safe
async def readyz(request: HttpRequest) -> JsonResponse:
    """200 when this process can take new work; 503 naming the failed checks, or draining."""
    if is_draining():
        return JsonResponse({"status": "draining", "checks": {}, "failed": ["shutdown"]}, status=503)
    checks: dict[str, Callable[[], Awaitable[None]]] = {"database": database_probe.run}
    if settings.REDIS_URL:
        checks["redis"] = ping_redis
    timeout = float(settings.READINESS_TIMEOUT)
    outcomes = await asyncio.gather(*(_outcome(name, check, timeout) for name, check in checks.items()))
    results = dict(zip(checks, outcomes, strict=True))
    failed = [name for name, outcome in results.items() if outcome != OK]
    if failed:
        return JsonResponse({"status": "unavailable", "checks": results, "failed": failed}, status=503)
    return JsonResponse({"status": "ready", "checks": results})


async def _outcome(name: str, check: Callable[[], Awaitable[None]], timeout: float) -> str:
    try:
        await asyncio.wait_for(check(), timeout)
    except TimeoutError:
        logger.warning("readiness: the %s check did not answer within %ss", name, timeout)
        return TIMEOUT
    except Exception as exc:
        logger.warning("readiness: the %s check failed: %r", name, exc)
        return ERROR
    return OK


def _select_one() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()


class DatabaseProbe:
    """``check`` (``SELECT 1``) on a database thread, at most one at a time.

    A database thread cannot be interrupted: a probe against a database that stopped answering
    keeps its thread until the driver gives up, whatever the caller's timeout. Probes arriving
    meanwhile wait for the one in flight instead of taking more of the threads the sockets'
    database calls need.
    """

    def __init__(self, check: Callable[[], None]) -> None:
        self.check = check
        self._in_flight: asyncio.Future[None] | None = None

    async def run(self) -> None:
        probe = self._in_flight
        if probe is None or probe.done() or probe.get_loop() is not asyncio.get_running_loop():
            probe = self._in_flight = asyncio.ensure_future(database_sync_to_async(self.check)())
            probe.add_done_callback(_retrieve)
        # The caller's timeout cancels its wait, not the probe others may be waiting for.
        await asyncio.shield(probe)


def _retrieve(probe: "asyncio.Future[Any]") -> None:
    if not probe.cancelled():
        probe.exception()  # read by whoever waited; nobody may have, when all timed out


database_probe = DatabaseProbe(_select_one)


async def ping_redis() -> None:
    """PING the channel layer's Redis on a connection of its own, without retries (the caller's
    timeout bounds it). A new connection per probe: a probe is rare, and a pool would belong to
    one event loop."""
    timeout = float(settings.READINESS_TIMEOUT)
    client = redis.asyncio.Redis.from_url(
        settings.REDIS_URL,
        socket_connect_timeout=timeout,
        socket_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
    )
    try:
        if not await client.ping():
            raise ConnectionError("Redis did not answer PONG")
    finally:
        await client.aclose()
