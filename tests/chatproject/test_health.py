"""``GET /healthz`` and ``GET /readyz`` (chatproject.health), in process: liveness touches no
service, readiness names what failed and says 503 while the process drains, neither sets a
cookie. The same endpoints on a real daphne, behind nginx, are in tests/e2e/test_cluster.py."""

import asyncio
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from django.db import OperationalError

from chatproject import health, secret_key
from sessions_app.processes import heartbeat
from tests.support.server import free_port

ROOT = Path(__file__).resolve().parents[2]


def nobody_listens() -> str:
    return f"redis://127.0.0.1:{free_port()}/0"


async def test_healthz_answers_without_the_database_or_redis(async_client, settings):
    # No django_db mark: a database access would raise, and Redis is nowhere.
    settings.REDIS_URL = nobody_listens()

    response = await async_client.get("/healthz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert response["Content-Type"] == "application/json"
    assert "no-store" in response["Cache-Control"]
    assert not response.cookies
    assert (await async_client.head("/healthz")).status_code == 200


@pytest.mark.django_db
async def test_readyz_checks_the_database_and_redis(async_client, settings, private_redis):
    settings.REDIS_URL = private_redis.url

    response = await async_client.get("/readyz")

    assert response.status_code == 200
    assert response.json() == {"status": "ready", "checks": {"database": "ok", "redis": "ok"}}
    assert "no-store" in response["Cache-Control"]
    assert not response.cookies


@pytest.mark.django_db
async def test_without_redis_configured_only_the_database_is_checked(async_client, settings):
    settings.REDIS_URL = ""

    response = await async_client.get("/readyz")

    assert response.status_code == 200
    assert response.json() == {"status": "ready", "checks": {"database": "ok"}}


@pytest.mark.django_db
async def test_readyz_names_redis_when_it_does_not_answer(async_client, settings, caplog):
    settings.REDIS_URL = nobody_listens()

    response = await async_client.get("/readyz")

    assert response.status_code == 503
    assert response.json() == {
        "status": "unavailable",
        "checks": {"database": "ok", "redis": "error"},
        "failed": ["redis"],
    }
    assert "readiness: the redis check failed" in caplog.text  # the why is in the log, not the body


@pytest.mark.django_db
async def test_a_hung_redis_is_a_timeout_within_the_readiness_timeout(async_client, settings, private_redis):
    settings.REDIS_URL = private_redis.url
    settings.READINESS_TIMEOUT = 0.3
    private_redis.freeze()  # accepts connections, answers nothing
    try:
        started = time.monotonic()
        response = await async_client.get("/readyz")
        took = time.monotonic() - started
    finally:
        private_redis.thaw()

    assert response.status_code == 503
    assert response.json()["checks"]["redis"] == "timeout"
    assert response.json()["failed"] == ["redis"]
    assert took < 2


async def test_readyz_names_the_database_when_it_fails(async_client, settings, monkeypatch):
    settings.REDIS_URL = ""

    def refused() -> None:
        raise OperationalError("connection refused")

    monkeypatch.setattr(health, "database_probe", health.DatabaseProbe(refused))

    response = await async_client.get("/readyz")

    assert response.status_code == 503
    assert response.json() == {
        "status": "unavailable",
        "checks": {"database": "error"},
        "failed": ["database"],
    }


async def test_readyz_is_503_while_the_process_drains(async_client, monkeypatch):
    # No django_db mark and no Redis: nothing is checked once a graceful shutdown began.
    monkeypatch.setattr(heartbeat, "draining", True)

    ready = await async_client.get("/readyz")
    alive = await async_client.get("/healthz")

    assert ready.status_code == 503
    assert ready.json() == {"status": "draining", "checks": {}, "failed": ["shutdown"]}
    assert alive.status_code == 200  # still alive: it is finishing its work


async def test_one_database_probe_at_a_time_however_many_ask():
    """A probe stuck on a database that stopped answering keeps its thread; the next callers
    wait for it (and time out) instead of taking another database thread each."""
    calls: list[int] = []
    release = threading.Event()

    def hung() -> None:
        calls.append(1)
        release.wait(10)

    probe = health.DatabaseProbe(hung)
    results = await asyncio.gather(
        *(asyncio.wait_for(probe.run(), 0.2) for _ in range(3)), return_exceptions=True
    )
    assert all(isinstance(r, TimeoutError) for r in results)
    assert len(calls) == 1
    release.set()
    await asyncio.sleep(0.2)  # the stuck probe ends; the next caller starts a new one
    await asyncio.wait_for(probe.run(), 5)
    assert len(calls) == 2


def test_probes_over_plain_http_get_an_answer_not_a_redirect_in_production():
    """Balancers probe each process on its own port over plain HTTP; under the production
    profile every other path redirects to HTTPS."""
    script = (
        "from django.test import Client; c = Client(); "
        "print(c.get('/healthz').status_code, c.get('/readyz').status_code, c.get('/accounts/login/').status_code)"
    )
    env = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DEBUG"}}
    env.update(
        DJANGO_ENV="production", SECRET_KEY=secret_key.generate(), ALLOWED_HOSTS="testserver", REDIS_URL=""
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "--no-imports", "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    healthz, readyz, login = result.stdout.split()
    assert healthz == "200"
    assert readyz in {"200", "503"}  # whether the database answers is not the point here
    assert login == "301"
