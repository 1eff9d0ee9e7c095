"""``/readyz`` of a real daphne when a service it needs fails: a private Redis stopped and
started again, and a database nobody listens for (the shared PostgreSQL is never touched).
Liveness (``/healthz``) stays 200 throughout: an outage of a shared service is no reason to
restart the process."""

import json
from typing import Any

import pytest

from chatproject.cluster import probe
from tests.support.server import LiveServer, free_port
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.fault]


def answer(server: LiveServer, path: str) -> tuple[int, dict[str, Any]]:
    status, body = probe(f"{server.url}{path}", "127.0.0.1")
    return status, json.loads(body) if status else {}


async def test_readyz_names_redis_while_it_is_down(server_factory, private_redis):
    server = server_factory.start(REDIS_URL=private_redis.url, READINESS_TIMEOUT="1")
    try:
        assert answer(server, "/readyz") == (
            200,
            {"status": "ready", "checks": {"database": "ok", "redis": "ok"}},
        )

        private_redis.stop()
        await wait_until(lambda: answer(server, "/readyz")[0] == 503, timeout=10)
        assert answer(server, "/readyz") == (
            503,
            {"status": "unavailable", "checks": {"database": "ok", "redis": "error"}, "failed": ["redis"]},
        )
        assert answer(server, "/healthz") == (200, {"status": "ok"})

        private_redis.start()
        await wait_until(lambda: answer(server, "/readyz")[0] == 200, timeout=10)
        assert answer(server, "/readyz")[1]["checks"] == {"database": "ok", "redis": "ok"}
    finally:
        server.stop()


async def test_readyz_names_the_database_when_it_cannot_be_reached(server_factory):
    nowhere = f"postgres://postgres@127.0.0.1:{free_port()}/tether"
    server = server_factory.start(DATABASE_URL=nowhere, REDIS_URL="", READINESS_TIMEOUT="1")
    try:
        status, body = answer(server, "/readyz")
        assert status == 503
        assert body["status"] == "unavailable" and body["failed"] == ["database"]
        assert body["checks"]["database"] in {"error", "timeout"}  # refused, or the pool still waiting
        assert answer(server, "/healthz") == (200, {"status": "ok"})
    finally:
        # It registered nothing anywhere; a SIGTERM would wait for its database thread, stuck
        # in the pool's 10 s wait for a connection.
        server.kill()
