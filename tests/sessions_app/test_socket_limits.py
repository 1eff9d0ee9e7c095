"""Socket input answered like REST, and one send budget shared by the socket and the API,
against a real daphne (python-socketio client)."""

import uuid

import aiohttp
import pytest

from sessions_app.models import SocketSession
from tests.support.client import ChatClient, api_token, login_cookie
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
