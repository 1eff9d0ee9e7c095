"""Message ids a client proposes are scoped by their thread: another user who uses the same id
first (on purpose: it leaked, or an integration derives its ids) can neither block a send nor
touch its records. Replayed against real daphnes, for both kinds of app."""

import uuid
from typing import Any

import aiohttp
import pytest
from asgiref.sync import sync_to_async

from tests.support.client import ChatClient, api_token, signed_in
from tests.support.waiting import wait_until_async
from threads_app.models import AcceptedMessage, Step

pytestmark = [pytest.mark.abuse, pytest.mark.django_db(transaction=True)]


async def post_send(server: Any, token: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    async with (
        aiohttp.ClientSession(headers={"Authorization": f"Token {token}"}) as http,
        http.post(f"{server.url}/api/chat/send", json=body) as response,
    ):
        return response.status, await response.json()


@sync_to_async
def sends_with(message_id: str) -> list[tuple[str, str, str]]:
    """(author, thread, text) of every send whose client chose ``message_id``."""
    rows = AcceptedMessage.objects.filter(client_id=message_id).order_by("accepted_at")
    return [(r.author.username, str(r.thread_id), r.text) for r in rows.select_related("author")]


@sync_to_async
def user_step_texts(thread_id: str) -> list[str]:
    return list(
        Step.objects.filter(thread_id=thread_id, type="user_message")
        .order_by("seq")
        .values_list("output", flat=True)
    )


async def started(server: Any, user: Any) -> ChatClient:
    client = await signed_in(server, user)
    await client.start()
    return client


async def test_an_engine_app_send_is_not_blocked_by_another_user_who_used_its_id_first(
    engine_server, make_user
):
    squatter, victim = make_user(), make_user()
    message_id = str(uuid.uuid4())
    # The squatter uses the id first, on the socket and on the API (its own threads).
    squatting = await started(engine_server, squatter)
    first = await squatting.send("squatted", message_id)
    assert "error" not in first
    status, _ = await post_send(
        engine_server, await api_token(squatter), {"messageId": message_id, "message": "x"}
    )
    assert status == 200

    # The victim's sends with that id go through, on both paths, and are answered.
    client = await started(engine_server, victim)
    answer = await client.send("mine, over the socket", message_id)
    assert (
        "error" not in answer
        and answer["messageId"] == message_id
        and answer["threadId"] != first["threadId"]
    )
    await client.wait_text("Echo #1: mine, over the socket", timeout=15)
    status, by_api = await post_send(
        engine_server, await api_token(victim), {"messageId": message_id, "message": "mine, over the API"}
    )
    assert status == 200 and by_api["messageId"] == message_id

    # A repeat by the squatter is still its own first send: the same answer, nothing new.
    assert await squatting.send("squatted", message_id) == first
    authors = [author for author, _, _ in await sends_with(message_id)]
    assert sorted(authors) == sorted([squatter.username] * 2 + [victim.username] * 2)
    assert await user_step_texts(first["threadId"]) == ["squatted"]
    await wait_until_async(lambda: _has_steps(answer["threadId"], ["mine, over the socket"]))
    await client.disconnect()
    await squatting.disconnect()


async def _has_steps(thread_id: str, texts: list[str]) -> bool:
    return await user_step_texts(thread_id) == texts


async def test_a_hooks_app_send_is_not_blocked_by_another_user_who_used_its_id_first(server, make_user):
    squatter, victim = make_user(), make_user()
    message_id = str(uuid.uuid4())
    squatting = await started(server, squatter)
    first = await squatting.send("squatted", message_id)
    await squatting.wait_text("echo: squatted")

    client = await started(server, victim)
    answer = await client.send("mine", message_id)
    assert "error" not in answer and answer["messageId"] == message_id
    await client.wait_text("echo: mine")
    # The victim's page retires its pending copy by the id it chose: the confirmed user step
    # names it.
    (confirmed,) = [m for m in client.named("new_message") if m.get("type") == "user_message"]
    assert confirmed["metadata"]["acceptedIds"] == [message_id] and confirmed["output"] == "mine"
    assert await user_step_texts(first["threadId"]) == ["squatted"]
    assert await user_step_texts(answer["threadId"]) == ["mine"]
    # Neither saw the other's message.
    assert "echo: mine" not in squatting.texts() and "echo: squatted" not in client.texts()
    await client.disconnect()
    await squatting.disconnect()
