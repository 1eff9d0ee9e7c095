"""How many packets one turn encodes (``event_frames.encodings``, the one JSON encoder of
what the server writes), and that an event reaching several sockets is encoded once and
written to each as the very same text: a test that fails if each socket encodes again.

Steady state (the thread exists), one socket:

- hooks-API app: ``chat-user-message``, ``task_start``, the user step's ``new_message``, the
  reply's ``new_message``, ``task_end`` and the send's ack: 6, with or without offsets (the
  event log keeps text cut from each frame). Before (each socket encoded what it wrote, the
  log its own copy): 10 with offsets, and 2 more per other socket on the thread.
- engine runtime: ``chat-user-message``, the ``queued`` answer's ack, ``task_start``, the user
  step's ``new_message``, the reply streamed (``stream_start``, the finished
  ``update_message``) and ``task_end``: 7, plus one per ``stream_token`` (the echo engine's
  words reach the runtime one or several at a time, as the pipe delivers them). Before: 13
  with offsets (the log's copy of each session event, tokens included), and each event
  again for every other socket on the thread (21 with three sockets).

A second socket showing the thread costs no encoding: it writes the frames the first one got.
The counts are pinned exactly: a change in either direction updates them here, with the reason.
"""

import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import pytest

from sessions_app.event_frames import encodings
from tests.support.client import session_cookie
from tests.support.wire import InProcessSocket, decode, in_process_socket, new_auth

pytestmark = pytest.mark.django_db(transaction=True)

HOOKS_APP = "tests.apps.lifecycle_app"
ENGINE_APP = "sessions_app.default_app"


async def one_turn(sock: InProcessSocket, text: str, ack_id: int) -> dict[str, Any]:
    """Send ``text`` and wait for ``task_end``; returns the send's ack."""
    message = {"message": {"id": str(uuid.uuid4()), "output": text}}
    answer: dict[str, Any] = await sock.call("client_message", message, ack_id=ack_id)
    await sock.event("task_end")
    return answer


def frames_of(sock: InProcessSocket, event: str) -> list[str]:
    """The EVENT frames named ``event`` the socket read, as they came."""
    return [f for f in sock.frames if f.startswith("42") and decode(f).data[0] == event]


@pytest.fixture
def in_memory(settings, monkeypatch, tmp_path) -> Any:
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    monkeypatch.setenv("HOOK_LOG", str(tmp_path / "hooks.jsonl"))
    monkeypatch.setenv("ECHO_STATE_DIR", str(tmp_path / "echo"))
    return settings


async def sockets_on_one_thread(
    stack: AsyncExitStack, user: Any, count: int, auth: dict[str, Any] | None = None
) -> AsyncIterator[InProcessSocket]:
    """``count`` sockets of ``user`` showing one thread: the first made it with a turn, the
    others resumed it (each a new session, as another tab)."""
    cookie = await session_cookie(user)
    first = await stack.enter_async_context(in_process_socket(cookie))
    await first.connect_namespace(new_auth(**(auth or {})))
    thread_id = (await one_turn(first, "first", 1))["threadId"]  # creates the thread
    yield first
    for _ in range(count - 1):
        other = await stack.enter_async_context(in_process_socket(cookie))
        await other.connect_namespace(new_auth(threadId=thread_id, **(auth or {})))
        await other.call("connection_successful", ack_id=1)
        await other.seen(lambda f: f.startswith('42["resume_thread"'))
        await other.event("task_end")  # its on_chat_resume ran: nothing of it lands in a later count
        yield other


async def encoded_per_turn(in_memory, make_user, chat_app: str, sockets: int, **auth: Any) -> int:
    """Packets encoded for one turn of the first socket, less one per ``stream_token`` it got."""
    in_memory.CHAT_APP = chat_app
    async with AsyncExitStack() as stack:
        opened = [s async for s in sockets_on_one_thread(stack, make_user(), sockets, auth)]
        await one_turn(opened[0], "warm", 2)
        opened[0].frames.clear()
        before = encodings.count
        await one_turn(opened[0], "second", 3)
        return encodings.count - before - len(frames_of(opened[0], "stream_token"))


@pytest.mark.parametrize(
    ("chat_app", "auth", "expected"),
    [
        (HOOKS_APP, {}, 6),
        (HOOKS_APP, {"offsets": True}, 6),  # the log keeps the frames' own text
        (ENGINE_APP, {}, 7),
        (ENGINE_APP, {"offsets": True}, 7),
    ],
    ids=["hooks-api", "hooks-api-offsets", "engine", "engine-offsets"],
)
async def test_packets_encoded_per_turn(in_memory, make_user, chat_app, auth, expected):
    encoded = await encoded_per_turn(in_memory, make_user, chat_app, 1, **auth)
    assert encoded == expected, f"{encoded} packets encoded for one turn of {chat_app}"


@pytest.mark.parametrize("chat_app", [HOOKS_APP, ENGINE_APP], ids=["hooks-api", "engine"])
async def test_another_socket_on_the_thread_costs_no_encoding(in_memory, make_user, chat_app):
    alone = await encoded_per_turn(in_memory, make_user, chat_app, 1)
    watched = await encoded_per_turn(in_memory, make_user, chat_app, 3)
    assert watched == alone, f"{alone} packets encoded for one socket, {watched} for three"


# What the watcher must see of the sender's turn: the user's step (other tabs see it through
# the thread's bus on the hooks API, as every event of the thread on the engine runtime), and
# on the hooks API the reply too (what a hooks-API session shows of its thread, transcribed,
# reaches its other tabs live, as the other tab's ``on_chat_resume`` greeting reaches the first).
SHOWN_ON_EVERY_TAB = [
    (HOOKS_APP, '"type":"user_message"'),
    (ENGINE_APP, '"type":"user_message"'),
    (HOOKS_APP, '"output":"echo: second"'),
]


@pytest.mark.parametrize(
    ("chat_app", "shown"),
    SHOWN_ON_EVERY_TAB,
    ids=["hooks-api-user-step", "engine-user-step", "hooks-api-reply"],
)
async def test_sockets_on_one_thread_write_the_same_encoding(in_memory, make_user, chat_app, shown):
    in_memory.CHAT_APP = chat_app
    async with AsyncExitStack() as stack:
        sender, watcher = [s async for s in sockets_on_one_thread(stack, make_user(), 2)]
        sender.frames.clear()
        watcher.frames.clear()
        await one_turn(sender, "second", 2)
        await watcher.expect(lambda f: f.startswith('42["new_message"') and shown in f)
        (mine,) = [f for f in frames_of(sender, "new_message") if shown in f]
        (theirs,) = [f for f in frames_of(watcher, "new_message") if shown in f]
        assert mine == theirs
        assert mine is theirs, "each socket encoded the event again"


async def thread_publishes_per_turn(in_memory, make_user, sockets: int) -> list[str]:
    """The events one hooks-API turn of the first socket published on the thread's bus."""
    from channels.layers import get_channel_layer

    in_memory.CHAT_APP = HOOKS_APP
    published: list[str] = []
    async with AsyncExitStack() as stack:
        opened = [s async for s in sockets_on_one_thread(stack, make_user(), sockets)]
        layer = get_channel_layer()
        assert layer is not None
        group_send = layer.group_send

        async def counted(group: str, message: dict[str, Any]) -> None:
            if group.startswith("thread."):
                published.append(message["event"])
            await group_send(group, message)

        await one_turn(opened[0], "warm", 2)
        layer.group_send = counted  # type: ignore[method-assign]  # counts, then sends as ever
        try:
            await one_turn(opened[0], "second", 3)
        finally:
            del layer.group_send
    return published


async def test_a_thread_one_tab_shows_gets_no_publish_of_its_output(in_memory, make_user):
    """Alone on its thread, a turn publishes what it always did (the send, its user step) and
    none of its output; with another tab, its reply as well."""
    alone = await thread_publishes_per_turn(in_memory, make_user, 1)
    assert alone == ["chat-user-message", "new_message"], alone
    watched = await thread_publishes_per_turn(in_memory, make_user, 2)
    assert watched == ["chat-user-message", "new_message", "new_message"], watched
