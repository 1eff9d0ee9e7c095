"""How many Redis commands one steady-state turn sends, on the Redis channel layer, for a
hooks-API app and for the engine runtime: a test that fails if the count grows back.

Redis is a ``redis-server`` of the test's own; its ``MONITOR`` stream records every command a
client sent (not those a script ran inside Redis), between two ``ECHO`` marks.

- one socket on the thread: the thread's bus publishes to that socket in this process, without
  Redis (its lease on "no member elsewhere", ``group_leases``), and the send budget's token
  comes from the allowance the first send took (``threads_app.token_bucket``: 10 tokens at
  120/min): 0 commands for both apps. Before, the budget was one script per send and every
  publish read the group's members (ZREMRANGEBYSCORE and ZRANGE in one pipeline; hooks API:
  2 publishes, the accepted send and the reply, 5 commands in 3 round trips; engine runtime:
  1, the accepted send, 3 in 2). A lease is renewed by one read per group and
  ``LEASE_SECONDS``, an allowance by one script per 10 sends.
- a member of the thread's group in another process: every publish reads the members and
  delivers to it through Redis (two commands each). A hooks-API turn then publishes its
  reply as well as the send and its user step (what a session shows goes to the thread's
  other tabs while there are any; alone on the thread, it is not published at all).

The lease and the allowance are on by default (``CHANNEL_GROUP_LEASE=1``,
``BUDGET_ALLOWANCE=10``); this test sets both itself, so that it counts the same whatever the
environment says.
"""

import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import redis

from sessions_app.channel_layer import DELIVER_TO_KEYS, ResilientRedisChannelLayer
from sessions_app.group_leases import READ_MEMBERS
from sessions_app.thread_bus import thread_group
from tests.support.client import session_cookie
from tests.support.wire import InProcessSocket, in_process_socket
from threads_app.models import Thread

pytestmark = pytest.mark.django_db(transaction=True)

START, END = "turn-starts", "turn-ends"
# How MONITOR shows the bus's two scripts: the group's members read, a delivery to them.
READ = "EVAL " + repr(READ_MEMBERS)[1:40]
DELIVER = "EVAL " + repr(DELIVER_TO_KEYS)[1:40]


class MonitoredCommands:
    """The commands clients sent the server between ``START`` and ``END`` (``MONITOR``)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.commands: list[str] = []
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        with redis.Redis.from_url(self.url).monitor() as monitor:  # type: ignore[no-untyped-call]
            self._ready.set()
            recording = False
            for command in monitor.listen():
                text = str(command["command"])
                if text == f"ECHO {START}":
                    recording = True
                elif text == f"ECHO {END}":
                    return
                elif recording and command.get("client_type") != "lua":
                    self.commands.append(text[:120])

    def __enter__(self) -> "MonitoredCommands":
        self._thread.start()
        assert self._ready.wait(5)
        self._marks = redis.Redis.from_url(self.url)
        self._marks.echo(START)  # connected before the mark: its HELLO is not counted
        return self

    def __exit__(self, *exc: Any) -> None:
        self._marks.echo(END)
        self._thread.join(5)


def counting_redis_commands(url: str) -> MonitoredCommands:
    return MonitoredCommands(url)


@pytest.fixture
def redis_settings(settings, private_redis) -> Iterator[str]:
    """The channel layer and every Redis client on the test's own server, whose lease records
    date from long ago (as on a server that has been up: a fresh one makes joins wait out a
    lease, in case it lost leases still trusted)."""
    settings.REDIS_URL = private_redis.url
    settings.BUDGET_ALLOWANCE = 10  # opt-in; set here whatever the environment says
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "sessions_app.channel_layer.ResilientRedisChannelLayer",
            # A lease longer than the test: the turns counted fall within one (on a loaded
            # machine a turn may outlast the default second, and its next publish renews it).
            "CONFIG": {
                "hosts": [{"address": private_redis.url}],
                "capacity": 1000,
                "expiry": 60,
                "group_lease": 60,
            },
        }
    }
    redis.Redis.from_url(private_redis.url).set("asgi:leases-began", 0)
    yield private_redis.url


async def socket_for(settings, make_user, chat_app: str) -> AsyncIterator[InProcessSocket]:
    settings.CHAT_APP = chat_app
    cookie = await session_cookie(make_user())
    async with in_process_socket(cookie) as opened:
        await opened.connect_namespace()
        yield opened


@pytest.fixture
async def hooks_sock(
    settings, make_user, redis_settings, monkeypatch, tmp_path
) -> AsyncIterator[InProcessSocket]:
    monkeypatch.setenv("HOOK_LOG", str(tmp_path / "hooks.jsonl"))
    async for opened in socket_for(settings, make_user, "tests.apps.lifecycle_app"):
        yield opened


@pytest.fixture
async def engine_sock(
    settings, make_user, redis_settings, monkeypatch, tmp_path
) -> AsyncIterator[InProcessSocket]:
    monkeypatch.setenv("ECHO_STATE_DIR", str(tmp_path / "echo"))
    async for opened in socket_for(settings, make_user, "sessions_app.default_app"):
        yield opened


async def one_turn(sock: InProcessSocket, text: str, ack_id: int) -> None:
    await sock.call("client_message", {"message": {"id": str(uuid.uuid4()), "output": text}}, ack_id=ack_id)
    await sock.event("task_end")


async def steady_turn_commands(sock: InProcessSocket, url: str) -> list[str]:
    await one_turn(sock, "first", 1)  # creates the thread
    await one_turn(sock, "second", 2)  # the thread's bus took its lease
    with counting_redis_commands(url) as counted:
        await one_turn(sock, "third", 3)
    return counted.commands


def assert_none(commands: list[str]) -> None:
    assert commands == [], f"{len(commands)}:\n" + "\n".join(commands)


async def test_a_hooks_api_turn_with_one_socket_sends_redis_nothing(hooks_sock, redis_settings):
    assert_none(await steady_turn_commands(hooks_sock, redis_settings))


async def test_an_engine_turn_with_one_socket_sends_redis_nothing(engine_sock, redis_settings):
    assert_none(await steady_turn_commands(engine_sock, redis_settings))


async def publishes_through_redis(sock: InProcessSocket, url: str, publishes: int) -> None:
    """A member of the thread's group in another process gets the turn's publishes, each read
    from Redis and delivered through it."""
    await one_turn(sock, "first", 1)
    thread = await Thread.objects.aget()
    elsewhere = ResilientRedisChannelLayer(hosts=[{"address": url}], capacity=1000)
    theirs = await elsewhere.new_channel()
    await elsewhere.group_add(thread_group(thread.id), theirs)
    with counting_redis_commands(url) as counted:
        await one_turn(sock, "second", 2)
    bus = [c for c in counted.commands if c.startswith((READ, DELIVER))]
    assert len(bus) == 2 * publishes, "\n".join(counted.commands)
    events = [(await elsewhere.receive(theirs))["event"] for _ in range(publishes)]
    assert events[0] == "chat-user-message", events
    await elsewhere.flush()


async def test_a_hooks_api_turn_publishes_through_redis_to_a_member_elsewhere(hooks_sock, redis_settings):
    # The send, its user step and the reply (what a session shows goes to the thread's other
    # tabs while there are any: ``thread_bus.watched_by_others``).
    await publishes_through_redis(hooks_sock, redis_settings, 3)


async def test_an_engine_turn_publishes_through_redis_to_a_member_elsewhere(engine_sock, redis_settings):
    await publishes_through_redis(engine_sock, redis_settings, 1)
