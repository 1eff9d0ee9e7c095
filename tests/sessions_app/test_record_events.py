"""Ownership follows the record: deleting a thread or deactivating a user ends what is live on
it (the sockets are told and closed, the running turn stops, later sends are refused)."""

import asyncio

import aiohttp
import pytest
from asgiref.sync import sync_to_async

from sessions_app.models import SocketSession
from tests.support.client import api_token, signed_in
from tests.support.server import uses_shared_services
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.abuse, pytest.mark.django_db(transaction=True)]


async def _delete_thread(server, user, thread_id: str) -> int:
    token = await api_token(user)
    async with (
        aiohttp.ClientSession() as http,
        http.delete(
            f"{server.url}/api/threads/{thread_id}/", headers={"Authorization": f"Token {token}"}
        ) as response,
    ):
        return response.status


async def test_deleting_a_thread_stops_its_turn_and_closes_its_sockets(server, make_user):
    user = make_user()
    client = await signed_in(server, user)
    await client.start()
    await client.wait_text("greeting")
    answer = await client.send("sleep 5")
    await client.wait_event("task_start", count=2)
    assert await _delete_thread(server, user, answer["threadId"]) == 204

    await client.wait_event("thread_deleted")
    assert client.named("thread_deleted") == [{"threadId": answer["threadId"]}]
    await wait_until(lambda: client.sio is None or not client.sio.connected, timeout=5)
    await asyncio.sleep(5.5)
    assert "slept" not in client.texts()  # the turn was stopped, it wrote nothing more
    assert len(server.hooks(client.session_id, "on_chat_end")) == 1
    assert not await SocketSession.objects.filter(pk=client.session_id).aexists()


async def test_a_deleted_thread_takes_no_more_sends(server, make_user):
    user = make_user()
    client = await signed_in(server, user)
    await client.start()
    answer = await client.send("first")
    await client.wait_text("echo: first")
    await client.disconnect()
    assert await _delete_thread(server, user, answer["threadId"]) == 204
    # The old session, reconnected (same sessionId), is refused a send into the deleted thread.
    await client.start()
    refused = await client.send("into the void")
    assert "deleted" in refused.get("error", "")
    await client.disconnect()


@pytest.mark.skipif(not uses_shared_services(), reason="the test process reaches the server through Redis")
async def test_deactivating_a_user_closes_their_sockets(server, make_user):
    user = make_user()
    client = await signed_in(server, user)
    await client.start()
    await client.wait_text("greeting")
    user.is_active = False
    await sync_to_async(user.save)()
    await wait_until(lambda: client.sio is None or not client.sio.connected, timeout=5)
    assert any(e.get("message") == "this account was deactivated" for e in client.named("error"))
