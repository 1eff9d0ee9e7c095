"""Event offsets and replay (DESIGN.md section 10): a client that asked for offsets and comes
back after a drop mid-reply gets every event it missed, in order, before anything new, each
once, and a flag saying whether the window covered the gap. Against real daphnes, for both
kinds of app, through a proxy that drops or resets the connection."""

import asyncio
import uuid
from typing import Any

import pytest

from tests.support.client import ChatClient, user_cookie
from tests.support.offset_client import OffsetClient
from tests.support.proxy import FaultProxy

pytestmark = [pytest.mark.fault, pytest.mark.django_db(transaction=True)]

TOKENS = 40


def streamed_reply(kind: str) -> tuple[str, str]:
    """The message that makes each app stream ``TOKENS`` tokens slowly, and the reply text."""
    if kind == "hooks":
        return f"slowstream {TOKENS} 0.03", "".join(f"t{i} " for i in range(TOKENS))
    words = " ".join(f"w{i}" for i in range(TOKENS))
    return f"!slow 0.03\n{words}", f"Echo #1: {words}"


@pytest.fixture(params=["hooks", "engine"])
def kind(request) -> str:
    return str(request.param)


@pytest.fixture
def app_server(kind, server, engine_server):
    return server if kind == "hooks" else engine_server


async def drop_mid_reply(
    kind: str, proxy: FaultProxy, app_server: Any, user: Any, fault: str, away: float
) -> OffsetClient:
    """A client streaming a reply through ``proxy`` loses its connection (``fault``) after a
    few tokens and reconnects ``away`` seconds later with the last offset it saw."""
    message, _reply = streamed_reply(kind)
    client = OffsetClient(proxy.url, await user_cookie(app_server.url, user))
    await client.connect()
    await client.send(message)
    await client.wait(lambda: client.tokens().count(" ") >= 5)
    getattr(proxy, fault)()
    await client.gone()
    await asyncio.sleep(away)  # tokens go on while the client is away
    await client.connect()
    return client


def ended(client: OffsetClient) -> bool:
    return any(event == "task_end" for event, _, _ in client.events[-3:])


@pytest.mark.parametrize("fault", ["drop", "reset"])
async def test_a_drop_mid_reply_is_recovered_with_every_event_once_and_in_order(
    kind, app_server, make_user, fault
):
    _message, reply = streamed_reply(kind)
    with FaultProxy([app_server.port]) as proxy:
        client = await drop_mid_reply(kind, proxy, app_server, make_user(), fault, away=0.5)
        await client.wait(lambda: ended(client) and len(client.recoveries) == 2)
        assert client.recoveries[-1]["recovered"] is True
        # Every token once, in order: the reply is whole, as if the connection never dropped.
        assert client.tokens() == reply
        offsets = client.offsets()
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), "a gap or a duplicate"
        await client.close()


async def test_a_gap_the_window_no_longer_covers_says_so(server_factory, make_user):
    small = server_factory.start(EVENT_REPLAY_MAX_EVENTS="5")
    with FaultProxy([small.port]) as proxy:
        client = await drop_mid_reply("hooks", proxy, small, make_user(), "drop", away=0.6)
        await client.wait(lambda: len(client.recoveries) == 2)
        assert client.recoveries[-1]["recovered"] is False
        # What comes after is delivered live, numbered on from the session's newest offset.
        await client.wait(lambda: ended(client))
        after = [o for o in client.offsets() if o > int(client.recoveries[-1]["offset"])]
        assert after and after == list(range(after[0], after[0] + len(after)))
        await client.close()


async def test_a_redis_restart_mid_reply_loses_no_token_live_and_the_reconnect_says_not_recovered(
    server_factory, private_redis, make_user
):
    """The window lives in Redis: while Redis is down the reply still streams (without offsets),
    and after a restart (Redis comes back empty) a reconnect is told the window is gone, so the
    client re-reads the history instead of trusting a replay."""
    app_server = server_factory.start(REDIS_URL=private_redis.url)
    message, reply = streamed_reply("hooks")
    client = OffsetClient(app_server.url, await user_cookie(app_server.url, make_user()))
    await client.connect()
    await client.send(message)
    await client.wait(lambda: client.tokens().count(" ") >= 5)
    private_redis.stop()
    await client.wait(lambda: ended(client))
    assert client.tokens() == reply  # every token live, the ones without an offset too
    private_redis.start()
    await client.close()
    await client.connect()
    assert client.recoveries[-1]["recovered"] is False
    await client.close()


async def test_a_malformed_offset_is_refused_with_the_reason(server, make_user):
    client = ChatClient(server.url, await user_cookie(server.url, make_user()))
    cases: list[tuple[dict[str, Any], str]] = [
        ({"offset": "-1"}, "offset must be a non-negative integer (as a string)"),
        ({"offset": ["1"]}, "offset must be a non-negative integer (as a string)"),
        ({"offsets": True, "pid": 7}, "pid must be a string"),
    ]
    for auth, reason in cases:
        refusal = await client.refused({"sessionId": str(uuid.uuid4()), **auth})
        assert refusal["message"] == reason
