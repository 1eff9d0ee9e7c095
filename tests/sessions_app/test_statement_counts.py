"""How many SQL statements one turn costs, from the send to ``task_end``: a test that fails
if the count grows back.

Steady state (the thread exists), PostgreSQL:

- hooks-API app (one ``Message.send()`` per message): the send's INSERT, the user step (one
  statement: seq, step, the send marked transcribed), the reply step (one statement), the
  outcome and the turn claim's release: 5; 22 before (issue 11), 6
  while every turn looked up its message's attachments (issue 22: only a send naming
  uploads does).
- engine runtime: the send's INSERT, the box read, the ``queued`` answer, the user step, the
  assistant step, the outcome: 6; 16 before.

The user session is written only when it changed, so an echo turn writes none. On SQLite a
new step takes the ORM's four statements in a transaction (14 and 15 in all). The counts are pinned exactly: a change in either direction updates them
here, with the reason.
"""

import uuid
from collections.abc import AsyncIterator

import pytest
from django.db import connection

from tests.support.client import session_cookie
from tests.support.statements import counting_statements
from tests.support.wire import InProcessSocket, in_process_socket

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
HEARTBEAT = "sessions_app_serverprocess"


def expected(postgresql: int, other: int) -> int:
    return postgresql if connection.vendor == "postgresql" else other


async def test_a_hooks_api_turn(sock):
    await one_turn(sock, "first", 1)  # creates the thread
    with counting_statements() as statements:
        await one_turn(sock, "second", 2)
    turn = statements.excluding(HEARTBEAT)
    assert len(turn) == expected(5, 14), f"{len(turn)}:\n" + "\n".join(turn)
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
    with counting_statements() as statements:
        await one_turn(engine_sock, "second", 2)
    turn = statements.excluding(HEARTBEAT)
    assert len(turn) == expected(6, 15), f"{len(turn)}:\n" + "\n".join(turn)
