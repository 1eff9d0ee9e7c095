"""Socket input answered like REST, and one send budget shared by the socket and the API,
against a real daphne (python-socketio client)."""

import asyncio
import json
import time
import uuid

import aiohttp
import pytest

from sessions_app.models import SocketSession
from tests.support.client import ChatClient, api_token, login_cookie
from tests.support.latency import assert_others_unaffected, latency_probe, paced
from tests.support.probe_process import turn_running
from tests.support.wire import new_auth, raw_socket
from threads_app.budgets import SENDS
from threads_app.models import AcceptedMessage

pytestmark = [pytest.mark.abuse, pytest.mark.django_db(transaction=True)]

RATE = 6


@pytest.fixture(scope="module")
def limited_server(server_factory):
    return server_factory.start(SEND_THROTTLE_RATE=f"{RATE}/min", CHAT_SETTINGS_MAX_BYTES="2048")


async def signed(server, user) -> ChatClient:
    client = ChatClient(server.url, await login_cookie(server.url, user.username, user.raw_password))
    await client.start()
    return client


@pytest.mark.parametrize(
    ("output", "error"),
    [
        ("nul\x00byte", "must not contain NUL characters"),
        ("lone \ud800 surrogate", "must be valid Unicode"),
        ("x" * 100_001, "longer than 100000 characters"),
        (["not", "text"], "must be a string"),
    ],
)
async def test_bad_message_text_is_answered_with_a_clear_error_and_records_nothing(
    limited_server, make_user, output, error
):
    client = await signed(limited_server, make_user())
    message_id = str(uuid.uuid4())
    answer = await client.call("client_message", {"message": {"id": message_id, "output": output}})
    assert error in answer["error"]
    assert not await AcceptedMessage.objects.filter(client_id=message_id).aexists()
    await client.disconnect()


async def test_chat_settings_over_budget_or_unstorable_are_refused_and_later_saves_still_work(
    limited_server, make_user
):
    client = await signed(limited_server, make_user())
    too_big = await client.call("chat_settings_change", {"notes": "x" * 4000})
    assert "the limit is 2048" in too_big["error"]
    nul = await client.call("chat_settings_change", {"bad": "a\x00b"})
    assert "NUL" in nul["error"]
    deep: dict[str, object] = {}
    for _ in range(200):
        deep = {"d": deep}
    nested = await client.call("chat_settings_change", deep)
    assert "error" in nested
    # None of them reached the session: a good change is saved as usual.
    assert await client.call("chat_settings_change", {"model": "small"}) is None
    record = await SocketSession.objects.aget(pk=client.session_id)
    assert record.chat_settings == {"model": "small"}
    await client.disconnect()


async def test_one_send_budget_for_the_socket_and_the_api(limited_server, make_user):
    user = make_user()
    client = await signed(limited_server, user)
    answers = [await client.send(f"message {i}") for i in range(RATE + 1)]
    assert all("error" not in a for a in answers[:RATE])
    assert "send rate is limited" in answers[RATE]["error"]
    # The API answers 429 for the same user: the socket spent the budget.
    token = await api_token(user)
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{limited_server.url}/api/chat/send",
            json={"messageId": str(uuid.uuid4()), "message": "over http"},
            headers={"Authorization": f"Token {token}"},
        ) as response,
    ):
        assert response.status == 429
    await client.disconnect()


@pytest.mark.parametrize(
    ("auth", "error"),
    [
        ({"userEnv": '{"key": "a\\u0000b"}'}, "userEnv must not contain NUL characters"),
        ({"userEnv": '{"key": "' + "x" * 20_000 + '"}'}, "the limit is 16384"),
        ({"userEnv": "[" + "[]," * 300_000 + "[]]"}, "the limit is 16384 bytes"),  # not parsed
        ({"userEnv": "[" * 50_000}, "nested deeper than 32 levels"),  # was a RecursionError
        ({"chatProfile": "p\x00"}, "chatProfile must not contain NUL characters"),
    ],
)
async def test_unstorable_connect_fields_are_refused_with_a_reason(limited_server, make_user, auth, error):
    user = make_user()
    client = ChatClient(
        limited_server.url, await login_cookie(limited_server.url, user.username, user.raw_password)
    )
    refusal = await client.refused({"sessionId": client.session_id, **auth})
    assert error in refusal["message"]


FLOOD, FLOOD_SECONDS = 200, 2.0


async def test_a_socket_flooding_sends_past_the_budget_is_refused_and_costs_others_nothing(
    engine_server, make_user
):
    """The issue's flood: 200 ``client_message`` in 2 s from one socket, against the default
    budget and the default (engine) app. Past the budget every send is refused with an
    ``{error}`` ack; what the budget let through is answered; another user's messages are
    answered about as fast as before, all along."""
    budget = SENDS.rate()
    assert budget is not None
    abuser = await signed(engine_server, make_user())
    floods = 0

    async def flood() -> None:
        nonlocal floods
        floods += 1
        started = time.monotonic()
        sends = []
        for i in range(FLOOD):
            sends.append(asyncio.create_task(abuser.send(f"flood {floods}.{i}")))
            await asyncio.sleep(FLOOD_SECONDS / FLOOD)
        answers = await asyncio.gather(*sends)
        accepted = [i for i, answer in enumerate(answers) if "error" not in answer]
        assert all("send rate is limited" in a["error"] for a in answers if "error" in a)
        assert len(accepted) <= budget.burst + budget.per_second * (time.monotonic() - started) + 1
        assert len(accepted) < FLOOD
        if accepted:  # what got through is answered (merged into a few turns) before the next flood
            last = f"flood {floods}.{accepted[-1]}"
            await abuser.wait_for(lambda c: any(last in r for r in c.replies()) and not turn_running(c), 60)

    async with latency_probe(engine_server, make_user()) as probe:
        await assert_others_unaffected(
            probe, flood, f"{FLOOD} client_message in {FLOOD_SECONDS:g} s", spacing=FLOOD_SECONDS / 10
        )
    await abuser.disconnect()


SETTINGS_EVENTS, SETTINGS_BYTES = 20, 900_000


async def test_big_chat_settings_are_refused_unparsed_and_cost_others_nothing(engine_server, make_user):
    """The issue's 20 ``chat_settings_change`` events of 900 KB each (under the 1 MB frame
    cap), against the default 64 KiB budget: each is refused with an ``{error}`` ack before it
    is parsed (a frame bigger than chat settings can need), the session keeps its settings, and
    another user's messages are answered about as fast. The frames are encoded once, as a
    client on another machine would: python-socketio encoding 18 MB anew for every run put as
    much CPU on these two cores as the server's own work, and measured the test."""
    user = make_user()
    cookie = await login_cookie(engine_server.url, user.username, user.raw_password)
    frame = json.dumps(["chat_settings_change", {"notes": "x" * SETTINGS_BYTES}])
    async with raw_socket(engine_server, cookie) as sock:
        auth = new_auth()
        await sock.handshake()
        await sock.connect_namespace(auth)
        assert await sock.call("chat_settings_change", {"model": "small"}, ack_id=1) is None

        async def flood() -> None:
            for ack_id in range(2, SETTINGS_EVENTS + 2):
                await sock.send_text(f"42{ack_id}{frame}")
            for ack_id in range(2, SETTINGS_EVENTS + 2):
                (answer,) = await sock.ack(ack_id)
                assert "exceeds the limit of 197632 for this event" in answer["error"]

        run = paced(flood, requests=SETTINGS_EVENTS, nbytes=SETTINGS_EVENTS * len(frame))
        async with latency_probe(engine_server, make_user()) as probe:
            await assert_others_unaffected(
                probe,
                run,
                f"{SETTINGS_EVENTS} chat_settings_change of {SETTINGS_BYTES // 1000} KB",
                spacing=0.02,
            )
        record = await SocketSession.objects.aget(pk=auth["sessionId"])
    assert record.chat_settings == {"model": "small"}
