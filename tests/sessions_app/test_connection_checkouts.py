"""How many connections a turn takes from the pool: none, once the database threads hold theirs.

Each database thread keeps its connection between calls (``sessions_app.database``); handing
it back and taking it again around every call cost about 0.13 ms of CPU a call (issue 22).
Counted at ``psycopg_pool``'s ``getconn`` on PostgreSQL (SQLite has no pool), for the calls
made on the database threads; the heartbeat's thread is its own.
"""

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg_pool
import pytest
from asgiref.sync import sync_to_async
from django.db import connection

from sessions_app.database import release_connections
from tests.sessions_app.test_statement_counts import engine_sock, one_turn, sock  # noqa: F401 - fixtures

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the pool is PostgreSQL's"),
]

# The executor's thread name prefix (``sessions_app.database.executor``).
DATABASE_THREAD_PREFIX = "database"


@contextmanager
def counting_checkouts(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The names of the database threads that took a connection from the pool meanwhile."""
    taken: list[str] = []
    getconn = psycopg_pool.ConnectionPool.getconn

    def counted(pool: Any, *args: Any, **kwargs: Any) -> Any:
        name = threading.current_thread().name
        if name.startswith(DATABASE_THREAD_PREFIX):
            taken.append(name)
        return getconn(pool, *args, **kwargs)

    monkeypatch.setattr(psycopg_pool.ConnectionPool, "getconn", counted)
    yield taken


async def checkouts_of_three_turns(opened: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The checkouts of three turns made after three others (the thread made, the database
    threads warmed)."""
    for n in range(1, 4):
        await one_turn(opened, f"warm {n}", n)
    with counting_checkouts(monkeypatch) as taken:
        for n in range(4, 7):
            await one_turn(opened, f"turn {n}", n)
    return taken


async def test_hooks_api_turns_take_no_connection_once_the_threads_hold_theirs(sock, monkeypatch):  # noqa: F811
    assert await checkouts_of_three_turns(sock, monkeypatch) == []


async def test_engine_turns_take_no_connection_once_the_threads_hold_theirs(engine_sock, monkeypatch):  # noqa: F811
    assert await checkouts_of_three_turns(engine_sock, monkeypatch) == []


async def test_released_connections_go_back_to_the_pool_and_the_next_turn_takes_one(sock, monkeypatch):  # noqa: F811
    await one_turn(sock, "hello", 1)
    released = await sync_to_async(release_connections)()
    assert released >= 1 and await sync_to_async(release_connections)() == 0  # all of them, once
    with counting_checkouts(monkeypatch) as taken:
        await one_turn(sock, "again", 2)
    assert taken, "the next turn took no connection: the released ones were still held"
