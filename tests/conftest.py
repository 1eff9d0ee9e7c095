"""Fixtures: daphne servers running the real ASGI app against the test database."""

import os

import pytest

from tests.support.server import ServerFactory, drop_stray_connections

pytest_plugins: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "false")


@pytest.fixture(scope="session")
def server_factory(django_db_setup, django_db_blocker, tmp_path_factory):  # type: ignore[no-untyped-def]
    factory = ServerFactory(tmp_path_factory.mktemp("servers"))
    yield factory
    factory.stop_all()
    with django_db_blocker.unblock():
        drop_stray_connections()


@pytest.fixture(scope="session")
def server(server_factory):  # type: ignore[no-untyped-def]
    """One shared daphne process running the lifecycle test app."""
    return server_factory.start()


@pytest.fixture
def make_user(transactional_db, django_user_model):  # type: ignore[no-untyped-def]
    created = 0

    def make(username: str | None = None, password: str = "pw-for-tests-1"):  # type: ignore[no-untyped-def]
        nonlocal created
        created += 1
        name = username or f"user{created}-{os.urandom(3).hex()}"
        user = django_user_model.objects.create_user(username=name, password=password)
        user.raw_password = password
        return user

    return make


@pytest.fixture(autouse=True)
async def _close_async_db_connections():  # type: ignore[no-untyped-def]
    """Async ORM calls run on asgiref's worker thread; close its connection after each test
    so the test database can be dropped at the end of the run."""
    yield
    from asgiref.sync import sync_to_async
    from django.db import connections

    await sync_to_async(connections.close_all)()
