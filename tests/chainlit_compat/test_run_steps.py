"""The run step Chainlit wraps each ``on_message`` in, on the sockets of Chainlit's frontend
(at ``<CHAINLIT_PATH_PREFIX>/ws/socket.io``), for a hooks-API app and an engine-runtime app:
the run opens under the user's message before the first reply, every reply is its child, it
ends before ``task_end``; thumbs on the run (its id as Chainlit's frontend sends it) are stored
on the turn's reply. A socket at Tether's own path is shown no run."""

import uuid
from typing import Any

import aiohttp
import pytest
from asgiref.sync import sync_to_async
from django.conf import settings

from tests.support.client import ChatClient, user_cookie
from threads_app.models import Feedback

pytestmark = pytest.mark.django_db(transaction=True)

P = settings.CHAINLIT_PATH_PREFIX
REPLY_EVENTS = ("new_message", "update_message", "stream_start")
# Each app kind: its CHAT_APP, and the reply to "hi".
APPS = {
    "hooks": ("tests.apps.chainlit_frontend_app", "You said: hi"),
    "engine": ("tests.apps.web_app", "Echo #1: hi"),
}


@pytest.fixture(scope="module", params=sorted(APPS))
def app_server(request, server_factory, tmp_path_factory) -> tuple[str, Any]:
    kind = request.param
    env = {"CHAT_APP": APPS[kind][0]}
    if kind == "engine":
        env["ECHO_STATE_DIR"] = str(tmp_path_factory.mktemp("runs-echo"))
    return kind, server_factory.start(**env)


@sync_to_async
def stored(user: Any) -> list[tuple[int, str]]:
    return list(Feedback.objects.filter(user=user).values_list("value", "step__output"))


async def turn(client: ChatClient, reply: str) -> str:
    """Send "hi" at the start of a chat and wait for the turn's end; the message's id."""
    await client.start()
    message_id = str(uuid.uuid4())
    await client.send("hi", message_id)
    await client.wait_for(lambda c: ended_after(c, reply), timeout=20)
    return message_id


def ended_after(client: ChatClient, reply: str) -> bool:
    """A ``task_end`` came after an event showing ``reply``."""
    shown = [
        i for i, (e, d) in enumerate(client.events) if isinstance(d, dict) and reply in str(d.get("output"))
    ]
    return bool(shown) and any(e == "task_end" for e, _ in client.events[shown[0] :])


def steps_shown(client: ChatClient) -> list[tuple[str, dict[str, Any]]]:
    return [(e, d) for e, d in client.events if e in (*REPLY_EVENTS, "task_end")]


async def test_a_chainlit_frontend_socket_sees_the_turn_inside_its_run_and_rates_it(app_server, make_user):
    kind, server = app_server
    reply = APPS[kind][1]
    user = make_user()
    cookie = await user_cookie(server.url, user)
    client = ChatClient(server.url, cookie, socketio_path=f"{P}/ws/socket.io")
    try:
        message_id = await turn(client, reply)
    finally:
        await client.disconnect()
    shown = steps_shown(client)
    runs = [(i, d) for i, (e, d) in enumerate(shown) if e != "task_end" and d.get("type") == "run"]
    replies = [
        (i, d) for i, (e, d) in enumerate(shown) if e != "task_end" and d["type"] == "assistant_message"
    ]
    assert any(reply in str(d.get("output")) for _, d in replies), shown
    opened, run = runs[0]
    assert shown[opened][0] == "new_message", shown
    assert (run["name"], run["parentId"], run["end"]) == ("on_message", message_id, None), run
    ours = [(i, d) for i, d in replies if i > opened]
    assert ours and all(d["parentId"] == run["id"] for _, d in ours), shown
    assert all(d["parentId"] is None for i, d in replies if i < opened), shown  # the greeting, if any
    closed, ended = runs[-1]
    assert ended["id"] == run["id"] and ended["end"] and closed > ours[-1][0], shown
    assert shown[closed + 1][0] == "task_end", shown

    body = {"feedback": {"forId": run["id"], "value": 1, "threadId": run["threadId"]}, "sessionId": ""}
    async with (
        aiohttp.ClientSession(headers={"Cookie": cookie, "Origin": server.url}) as http,
        http.put(f"{server.url}{P}/feedback", json=body) as answered,
    ):
        assert answered.status == 200, await answered.text()
    rows = await stored(user)
    assert len(rows) == 1 and rows[0][0] == 1 and reply in rows[0][1], rows


async def test_a_socket_at_tethers_path_is_shown_no_run(app_server, make_user):
    kind, server = app_server
    client = ChatClient(server.url, await user_cookie(server.url, make_user()))
    try:
        await turn(client, APPS[kind][1])
    finally:
        await client.disconnect()
    shown = steps_shown(client)
    assert not [d for e, d in shown if e != "task_end" and d.get("type") == "run"], shown
    assert all(d.get("parentId") is None for e, d in shown if e != "task_end"), shown
