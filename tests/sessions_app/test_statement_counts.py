"""How many SQL statements, and how many database trips, one turn costs, from the send to
``task_end``: a test that fails if either count grows back.

A trip is one call through ``sessions_app.database.database_sync_to_async`` (a thread hop and
a connection checkout, whatever statements it sends); statements are counted at the cursor.
Steady state (the thread exists), PostgreSQL:

- hooks-API app (one ``Message.send()`` per message), 2 trips (issue 22 item 2; 4 before):
  the send's INSERT with the turn's claim (one statement, ``turn_statements.accept_claiming``)
  and the user step (one statement: seq, step, the send marked transcribed) in the accepting
  trip (``hook_sends._accept_claiming``); the reply step (deferred by ``send()`` to the
  release, ``sessions_app.replies``), then the outcome and the claim's release (one
  statement, ``turn_statements.release``) in the releasing trip: 4 statements (6 while the
  claim and the outcome were statements of their own). (Pinned as 5 before: the count then left out
  every statement naming the heartbeat's table, the claim's liveness subquery among them;
  the heartbeat is now told apart by its thread.) 22 before issue 11, one more while every
  turn looked up its message's attachments (issue 22: only a send naming uploads does).
- engine runtime, 3 trips (4 before, 6 before that): the send's INSERT with the box read
  (``with_read``); the user step, which also records the answer's ``queued`` (a send started
  on a ready run, ``chats.submit_here``; a trip of its own before); the reply with the send's
  outcome, one statement (``services.write_answering_step``: the reply is held until the
  engine's result, ``chat_session.HeldReply``; they were two trips): 4 statements (5 before;
  16 before issue 11). The user step is not in the accepting trip: the box that trip reads
  picks the session (its pool) that decides whether the turn starts at once.

The user session is written only when it changed, so an echo turn writes none. On SQLite a
new step takes the ORM's four statements in a transaction (15 and 15 in all; the ORM marks
the ``queued`` answer with a statement of its own). The counts are pinned exactly: a change
in either direction updates them here, with the reason.
"""

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connection

from tests.support.client import session_cookie
from tests.support.statements import Statements, counting_statements, counting_trips
from tests.support.wire import InProcessSocket, in_process_socket, new_auth

pytestmark = pytest.mark.django_db(transaction=True)


async def signed_in_socket(settings, make_user, chat_app: str) -> AsyncIterator[InProcessSocket]:
    """A socket past its namespace CONNECT, for ``chat_app`` on the in-memory channel layer."""
    settings.CHAT_APP = chat_app
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    cookie = await session_cookie(make_user())
    async with in_process_socket(cookie) as opened:
        await opened.connect_namespace()
        yield opened


@pytest.fixture
async def sock(settings, make_user, monkeypatch, tmp_path) -> AsyncIterator[InProcessSocket]:
    monkeypatch.setenv("HOOK_LOG", str(tmp_path / "hooks.jsonl"))
    async for opened in signed_in_socket(settings, make_user, "tests.apps.lifecycle_app"):
        yield opened


async def one_turn(sock: InProcessSocket, text: str, ack_id: int) -> None:
    message = {"message": {"id": str(uuid.uuid4()), "output": text}}
    await sock.call("client_message", message, ack_id=ack_id)
    await sock.event("task_end")


# The process's liveness heartbeat (a thread of its own, every 0.5 s) is not the turn's work.
HEARTBEAT_THREAD = "tether-heartbeat"


def turn_statements(statements: Statements) -> list[str]:
    return statements.not_from_thread(HEARTBEAT_THREAD)


def expected(postgresql: int, other: int) -> int:
    return postgresql if connection.vendor == "postgresql" else other


async def test_a_hooks_api_turn(sock):
    await one_turn(sock, "first", 1)  # creates the thread
    with counting_statements() as statements, counting_trips() as trips:
        await one_turn(sock, "second", 2)
    turn = turn_statements(statements)
    assert len(turn) == expected(4, 15), f"{len(turn)}:\n" + "\n".join(turn)
    # One trip accepts, claims and transcribes; one writes the reply, the outcome and the release.
    assert trips.names == ["_accept_claiming", "_release"], trips.names
    assert not statements.matching('sessions_app_socketsession" SET "user_session"')
    # The send named no upload: its turn looks up no attachments (issue 22).
    assert not statements.matching("media_app_element"), statements.matching("media_app_element")


@pytest.fixture
async def engine_sock(settings, make_user, tmp_path, monkeypatch) -> AsyncIterator[InProcessSocket]:
    monkeypatch.setenv("ECHO_STATE_DIR", str(tmp_path / "echo"))
    async for opened in signed_in_socket(settings, make_user, "sessions_app.default_app"):
        yield opened


async def test_an_engine_runtime_turn(engine_sock):
    await one_turn(engine_sock, "first", 1)
    with counting_statements() as statements, counting_trips() as trips:
        await one_turn(engine_sock, "second", 2)
    turn = turn_statements(statements)
    assert len(turn) == expected(4, 15), f"{len(turn)}:\n" + "\n".join(turn)
    # The reply and the send's outcome are one write (one statement on PostgreSQL).
    assert trips.names == ["_accept_and_read", "user_step", "write_reply_answering"], trips.names


# --- resuming a thread -----------------------------------------------------------------------
# A resume (auth ``threadId``), from the namespace CONNECT to the end of ``on_chat_resume``
# (its ``task_end``). The count does not depend on the thread's length: its steps are one
# statement (``threads_app.read_cuts``), whole or paged (``resumeSteps``). PostgreSQL, hooks
# API: the session's INSERT, its owner check, the resume claim, the thread, its steps, its
# elements, the session's first interaction, the hook's claim, its message, its release;
# the engine runtime reads its box instead of sending a message. A paged resume of a thread
# longer than its page also rebuilds the chat context from the transcript (one statement).
# The counts include the claims' liveness checks (they name the heartbeat's table, which the
# count once left out: +2 for the hooks API's two claims, +4 for the engine runtime's).


@sync_to_async
def thread_of(user, steps: int) -> uuid.UUID:
    from threads_app.models import Thread
    from threads_app.services import default_box_for, upsert_step

    thread = Thread.objects.create(owner=user, box=default_box_for(user), name="resumed")
    for i in range(steps):
        kind = "user_message" if i % 2 == 0 else "assistant_message"
        upsert_step(thread.id, uuid.uuid4(), type=kind, name=kind, output=f"line {i}")
    return thread.id


async def resume_statements(
    settings, user, chat_app: str, steps: int, resume_steps: int | None = None
) -> tuple[list[str], dict[str, Any]]:
    """The statements of one resume of a thread of ``steps`` steps, and its ThreadDict."""
    settings.CHAT_APP = chat_app
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    thread_id = await thread_of(user, steps)
    paged = {} if resume_steps is None else {"resumeSteps": resume_steps}
    async with in_process_socket(await session_cookie(user)) as sock:
        with counting_statements() as statements:
            await sock.connect_namespace(new_auth(threadId=str(thread_id), **paged))
            await sock.send_event("connection_successful")
            [resumed] = await sock.event("resume_thread")
            await sock.event("task_end")  # on_chat_resume's turn ended
    return turn_statements(statements), resumed


def step_reads(statements: list[str]) -> list[str]:
    """The reads of the transcript (not the lookups of a step being written)."""
    return [
        s
        for s in statements
        if 'FROM "threads_app_step"' in s and "ORDER BY" in s and not s.endswith("LIMIT 1")
    ]


RESUME_APPS = [("tests.apps.lifecycle_app", 18, 25), ("sessions_app.default_app", 20, 23)]


@pytest.fixture
def app_env(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("HOOK_LOG", str(tmp_path / "hooks.jsonl"))
    monkeypatch.setenv("ECHO_STATE_DIR", str(tmp_path / "echo"))


@pytest.mark.parametrize(("chat_app", "postgresql", "sqlite"), RESUME_APPS)
async def test_a_full_resume_costs_the_same_statements_for_10_and_200_steps(
    settings, make_user, app_env, chat_app, postgresql, sqlite
):
    await resume_statements(settings, make_user(), chat_app, 1)  # the process's first resume
    for steps in (10, 200):
        statements, resumed = await resume_statements(settings, make_user(), chat_app, steps)
        assert len(resumed["steps"]) == steps and resumed["omittedBeforeSeq"] is None
        listing = f"{steps} steps, {len(statements)} statements:\n" + "\n".join(statements)
        assert len(statements) == expected(postgresql, sqlite), listing
        assert len(step_reads(statements)) == 1, listing


PAGED_RESUME_APPS = [("tests.apps.lifecycle_app", 19, 26), ("sessions_app.default_app", 21, 24)]


@pytest.mark.parametrize(("chat_app", "postgresql", "sqlite"), PAGED_RESUME_APPS)
async def test_a_paged_resume_costs_the_same_statements_for_20_and_200_steps(
    settings, make_user, app_env, chat_app, postgresql, sqlite
):
    await resume_statements(settings, make_user(), chat_app, 1, resume_steps=10)
    for steps in (20, 200):
        statements, resumed = await resume_statements(settings, make_user(), chat_app, steps, resume_steps=10)
        assert [s["seq"] for s in resumed["steps"]] == list(range(steps - 9, steps + 1))
        assert resumed["omittedBeforeSeq"] == steps - 9
        listing = f"{steps} steps, {len(statements)} statements:\n" + "\n".join(statements)
        assert len(statements) == expected(postgresql, sqlite), listing
        # The page, and the chat context rebuilt within its own budget.
        assert len(step_reads(statements)) == 2, listing
