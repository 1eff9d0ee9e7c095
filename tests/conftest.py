"""Fixtures: daphne servers running the real ASGI app against the test database."""

import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.conf import settings
from django.core.management.base import CommandError
from django.core.management.commands import flush
from django.db import connections

from chatproject.servers import SERVERS
from tests.support.proxy import FaultProxy
from tests.support.redis_server import PrivateRedis
from tests.support.server import ServerFactory, drop_stray_connections, uses_shared_services

# Fixtures shared by test modules of several apps (the fake OpenAI-compatible server).
pytest_plugins: list[str] = ["tests.support.fake_openai"]

# Markers (registered in pyproject.toml). ``live`` is given here to every test that starts
# daphne, i.e. uses ``server_factory`` through any fixture; the other markers are set by each
# module. `make test-fast` deselects all of these.
SLOW_MARKERS = ("live", "browser", "two_process", "fault", "abuse")
TWO_PROCESS_SKIP = (
    "two_process: needs DATABASE_URL (PostgreSQL) and REDIS_URL (Redis), which two daphne "
    "processes share; .ci/run sets both"
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests that start daphne ``live``; skip ``two_process`` tests when PostgreSQL
    and Redis are not configured. That skip depends on the environment only; under CI (``CI``
    set, where .ci/run configures both) it is not applied, so such a test fails instead."""
    shared = uses_shared_services()
    for item in items:
        if "server_factory" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.live)
        if item.get_closest_marker("two_process") and not shared and not os.environ.get("CI"):
            item.add_marker(pytest.mark.skip(reason=TWO_PROCESS_SKIP))


# Logins hash passwords on every test; a fast hasher keeps the suite quick. The servers the
# tests start inherit it through the environment.
FAST_HASHER = "django.contrib.auth.hashers.MD5PasswordHasher"
os.environ["PASSWORD_HASHERS"] = FAST_HASHER
# Rate-limit counters live in Redis when it is configured; each run counts on its own.
os.environ["CACHE_KEY_PREFIX"] = f"tether-test-{os.urandom(4).hex()}"
settings.PASSWORD_HASHERS = [FAST_HASHER]
# The test runner's own process takes no orphaned work (the servers it starts do): in-process
# tests must not race the live servers for boxes and sends.
settings.RECOVERY_EVERY = 0
# Nor does it close idle engine runs on a timer (tests call BoxPool.close_idle themselves).
settings.ENGINE_IDLE_TIMEOUT = 0
# Nor publish dashboard samples (the servers do; the dashboard's tests read theirs).
settings.DASHBOARD_PUBLISH_EVERY = 0


@pytest.fixture(autouse=True)
def _fresh_send_budgets():
    """Each test starts with full budgets, the read budget too (their buckets are keyed by
    user pk, which a database flushed after a test hands out again)."""
    from threads_app.budgets import reset_all
    from threads_app.read_budget import read_budget

    reset_all()
    read_budget.reset()


@pytest.fixture(scope="session", autouse=True)
def _stop_process_heartbeat(django_db_setup):
    """In-process tests that use the mailbox register this process's liveness row; its
    heartbeat thread stops, and the database threads hand their kept connections back, before
    the test database is dropped (a connection open on it would refuse the DROP)."""
    yield
    from sessions_app.database import release_connections
    from sessions_app.processes import heartbeat

    heartbeat.stop()
    release_connections()


@pytest.fixture(scope="session", autouse=True)
def _flush_survives_live_servers():
    """Between tests the database is emptied with TRUNCATE while the test's daphne servers
    may still be writing (a heartbeat, a save on disconnect); PostgreSQL can then report a
    deadlock. The flush is retried instead of failing the test that just passed."""
    original = flush.Command.handle

    def handle(self, **options):
        # The live servers outlive the test: their liveness rows survive the flush (else they
        # would look dead until their next heartbeat, and their claims free for the taking).
        from sessions_app.models import ServerProcess

        processes = list(ServerProcess.objects.all())
        for attempt in range(10):
            try:
                result = original(self, **options)
                ServerProcess.objects.bulk_create(processes, ignore_conflicts=True)
                return result
            except CommandError as exc:
                if "deadlock detected" not in str(exc.__cause__) or attempt == 9:
                    raise
                time.sleep(0.1 * (attempt + 1))
        return None

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(flush.Command, "handle", handle)
        yield


_factories: list[ServerFactory] = []  # the run's (one, once a test needs a server)


@pytest.fixture(scope="session")
def server_factory(django_db_setup, django_db_blocker, tmp_path_factory):
    factory = ServerFactory(tmp_path_factory.mktemp("servers"))
    _factories.append(factory)
    yield factory
    factory.stop_all()
    with django_db_blocker.unblock():
        drop_stray_connections()


@pytest.fixture(scope="module", autouse=True)
def _stop_module_servers():
    """The servers a module started stop with it (``ServerFactory``)."""
    yield
    for factory in _factories:
        factory.stop_transient()


@pytest.fixture(scope="session")
def server(server_factory):
    """One shared daphne process running the lifecycle test app."""
    return server_factory.start_for_session()


@pytest.fixture(scope="session")
def engine_server(server_factory, tmp_path_factory):
    """A daphne process running the default app: messages go to the echo engine runtime.
    Its webhooks may go to loopback, where the tests' receivers listen."""
    return server_factory.start_for_session(
        CHAT_APP="sessions_app.default_app",
        ECHO_STATE_DIR=str(tmp_path_factory.mktemp("echo")),
        WEBHOOK_ALLOWED_HOSTS="127.0.0.1",
        TASK_WORKER_THREADS="2",
    )


_other_servers: dict[tuple[str, str], Any] = {}  # (app, server) -> the run's LiveServer


def _server_of(kind: str, shared: Any, server_factory: ServerFactory, **env: str) -> Any:
    """``shared`` when it already runs on ``kind``, else one process of ``kind`` with the same
    environment, started once for the run."""
    if shared.server == kind:
        return shared
    key = (env.get("CHAT_APP", ""), kind)
    if key not in _other_servers or not _other_servers[key].alive():
        _other_servers[key] = server_factory.start_for_session(server=kind, **env)
    return _other_servers[key]


@pytest.fixture(params=SERVERS)
def server_each(request, server, server_factory):
    """``server`` (the lifecycle app) under daphne, then under uvicorn: for the tests that
    stand for the rest under both servers (``SERVER`` picks the one of all the others)."""
    return _server_of(request.param, server, server_factory)


@pytest.fixture(params=SERVERS)
def engine_server_each(request, engine_server, server_factory, tmp_path_factory):
    """``engine_server`` (the default app) under daphne, then under uvicorn."""
    return _server_of(
        request.param,
        engine_server,
        server_factory,
        CHAT_APP="sessions_app.default_app",
        ECHO_STATE_DIR=str(tmp_path_factory.mktemp("echo")),
        WEBHOOK_ALLOWED_HOSTS="127.0.0.1",
    )


@pytest.fixture
def private_redis(tmp_path):
    """A running ``redis-server`` of this test's own (``.url``, ``.stop()``, ``.start()``,
    ``.kill()``, ``.freeze()``), to fail at will without touching the shared Redis. Function
    scoped: a fresh, empty server per test (it starts in well under a second); a module that
    wants one server for all its tests can use ``PrivateRedis`` as a context manager."""
    redis_server = PrivateRedis(tmp_path / "redis").start()
    yield redis_server
    redis_server.close()


@pytest.fixture
def fault_proxy():
    """``fault_proxy(*backend_ports)`` makes a ``FaultProxy`` to those loopback ports; every
    proxy made is stopped when the test ends."""
    proxies: list[FaultProxy] = []

    def make(*ports: int) -> FaultProxy:
        proxy = FaultProxy(ports)
        proxies.append(proxy)
        return proxy

    yield make
    for proxy in proxies:
        proxy.stop()


@pytest.fixture
def user(django_user_model):
    """A thread owner, for tests that call services and views in-process."""
    return django_user_model.objects.create_user(username="owner", password="pw-for-tests-1")


@pytest.fixture
def other_user(django_user_model):
    """Someone who must never see the owner's data."""
    return django_user_model.objects.create_user(username="intruder", password="pw-for-tests-1")


@pytest.fixture
def make_user(transactional_db, django_user_model):
    """``make_user()`` creates a user (``.raw_password`` set), also from async tests: the ORM
    call runs on a worker thread, so Django's async-safety check stays on for the suite."""
    created = 0
    worker = ThreadPoolExecutor(max_workers=1)

    def create(username: str | None, password: str):
        nonlocal created
        created += 1
        name = username or f"user{created}-{os.urandom(3).hex()}"
        user = django_user_model.objects.create_user(username=name, password=password)
        user.raw_password = password
        return user

    def make(username: str | None = None, password: str = "pw-for-tests-1"):
        return worker.submit(create, username, password).result()

    yield make
    worker.submit(connections.close_all).result()
    worker.shutdown()


@pytest.fixture(autouse=True)
async def _close_async_db_connections():
    """Async ORM calls run on asgiref's worker thread; close its connection after each test
    so the test database can be dropped at the end of the run."""
    yield
    from asgiref.sync import sync_to_async
    from django.db import connections

    await sync_to_async(connections.close_all)()


@pytest.fixture
def own_webhook_queue(monkeypatch) -> str:
    """A webhook queue of this test's alone, for tests that run the attempts they enqueue
    themselves. The run's servers share the test database and, when REDIS_URL is set, this
    process's channel layer, so ``webhook_tasks.queue()`` names the same queue in both: a
    server whose workers run (``engine_server``) would take the test's attempt and deliver it
    a second time."""
    from sessions_app import webhook_tasks

    name = f"webhooks-test-{os.urandom(6).hex()}"
    monkeypatch.setattr(webhook_tasks, "queue", lambda: name)
    return name
