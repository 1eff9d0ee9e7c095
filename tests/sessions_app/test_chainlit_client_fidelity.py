"""What Chainlit's own client (``@chainlit/react-client``) reads works against Tether, for
both kinds of app (a hooks-API app, the engine runtime's default app), over a real daphne and
python-socketio clients that send what that client sends (no acks on its sends).

- Streamed replies: the client appends a ``stream_token`` to ``content`` when the message has
  that key, else to ``output``; Chainlit's step dicts have no ``content``, nor do Tether's
  message and step dicts.
- The user's message: the client draws it under the id it chose when it sends it, so the turn
  shows it under that id (the client updates its copy instead of drawing a second).
- Events its frontend emits for features Tether lacks (favorites, audio, the host window,
  settings edited as typed) are answered as Chainlit answers them with the feature off:
  ``set_favorites`` with no favorites, else nothing; never ``error``.
- A refused send (invalid, or over the send budget) also comes as a ``toast``, which its UI
  shows, when the send asked for no ack; the ack keeps its content for clients reading it.
"""

import uuid
from typing import Any

import pytest

from tests.support.client import ChatClient, signed_in

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

# Chainlit 2.x's StepDict (backend/chainlit/step.py), which message dicts share.
CHAINLIT_STEP_KEYS = {
    "name", "type", "id", "threadId", "parentId", "command", "modes", "streaming",
    "waitForAnswer", "isError", "metadata", "tags", "input", "output", "createdAt", "start",
    "end", "generation", "showInput", "defaultOpen", "autoCollapse", "language", "icon",
    "feedback",
}  # fmt: skip
# Tether's one addition: the step's place in the transcript (a client's "up to N").
TETHER_STEP_KEYS = {"seq"}
# What each app answers to ``stream 3`` (the test hooks app streams t0 t1 t2; the echo
# engine streams its echo of the text word by word).
STREAMED = {"hooks": "t0 t1 t2 ", "engine": "Echo #1: stream 3"}
FRONTEND_EVENTS: list[tuple[str, Any]] = [
    ("message_favorite", {"message": {"id": str(uuid.uuid4()), "metadata": {"favorite": True}}}),
    ("window_message", {"kind": "from the host page"}),
    ("audio_start", None),
    ("audio_chunk", {"isStart": True, "mimeType": "pcm16", "elapsedTime": 0, "data": [0, 1, 2]}),
    ("audio_end", None),
    ("chat_settings_edit", {"model": "small"}),
]


@pytest.fixture(params=["hooks", "engine"])
def app(request: pytest.FixtureRequest) -> tuple[str, Any]:
    """(kind, server): the lifecycle test app, then the default app's echo engine runtime."""
    return request.param, request.getfixturevalue("server" if request.param == "hooks" else "engine_server")


@pytest.fixture(scope="module")
def limited(server_factory, tmp_path_factory) -> dict[str, Any]:
    """One server of each kind that takes one send a minute."""
    return {
        "hooks": server_factory.start(SEND_THROTTLE_RATE="1/min"),
        "engine": server_factory.start(
            SEND_THROTTLE_RATE="1/min",
            CHAT_APP="sessions_app.default_app",
            ECHO_STATE_DIR=str(tmp_path_factory.mktemp("echo")),
        ),
    }


def steps_shown(client: ChatClient) -> list[tuple[str, dict[str, Any]]]:
    return [
        (name, data)
        for name, data in client.events
        if name in ("new_message", "stream_start", "update_message")
    ]


def client_state(client: ChatClient) -> dict[str, dict[str, Any]]:
    """What a Chainlit client that sent nothing itself holds after these events, by the rules
    of its ``utils/message.ts``: steps by id (a known id is merged), tokens appended to
    ``content`` when the message has that key, else to ``output``."""
    held: dict[str, dict[str, Any]] = {}
    for name, data in client.events:
        if name in ("new_message", "stream_start", "update_message"):
            held[data["id"]] = {**held.get(data["id"], {}), **data}
        elif name == "stream_token" and data["id"] in held:
            field = "content" if "content" in held[data["id"]] else "output"
            held[data["id"]][field] = held[data["id"]].get(field, "") + data["token"]
    return held


async def test_a_streamed_reply_and_the_users_message_read_as_chainlits_client_reads_them(app, make_user):
    kind, server = app
    client = await signed_in(server, make_user())
    await client.start()
    message_id = str(uuid.uuid4())
    # Chainlit's client: no ack asked for.
    await client.emit(
        "client_message", {"message": {"id": message_id, "output": "stream 3"}, "fileReferences": []}
    )
    await client.wait_for(
        lambda c: any(m["type"] == "assistant_message" for m in c.named("update_message")), 30
    )
    await client.wait_event("task_end", count=2, timeout=30)  # connection_successful's, then the turn's
    shown = steps_shown(client)

    users = [data for name, data in shown if data["type"] == "user_message"]
    assert [(u["id"], u["output"]) for u in users] == [(message_id, "stream 3")], shown
    assert users[0]["metadata"]["acceptedIds"] == [message_id], users
    for name, data in shown:  # the app's greeting too
        if data["type"] != "user_message":
            assert "content" not in data, (name, data)
            assert set(data) - CHAINLIT_STEP_KEYS <= TETHER_STEP_KEYS, (
                name,
                sorted(set(data) - CHAINLIT_STEP_KEYS),
            )
    (start,) = client.named("stream_start")
    assert (start["type"], start["streaming"], start["output"]) == ("assistant_message", True, ""), start
    assert [name for name, data in shown if data["id"] == start["id"]] == [
        "stream_start",
        "update_message",
    ], shown
    # What the tokens build in that client's state is the reply, before its final update.
    tokens = "".join(t["token"] for t in client.named("stream_token") if t["id"] == start["id"])
    assert tokens.strip() == STREAMED[kind].strip(), client.named("stream_token")
    (final,) = [m for m in client.named("update_message") if m["id"] == start["id"]]
    assert final["output"].strip() == STREAMED[kind].strip(), final
    client.events = [e for e in client.events if not (e[0] == "update_message" and e[1]["id"] == start["id"])]
    assert client_state(client)[start["id"]]["output"] == final["output"], client_state(client)
    assert "error" not in [name for name, _ in client.events], client.events
    await client.disconnect()


async def test_the_users_message_is_shown_once_in_another_tab_and_on_resume(app, make_user):
    _kind, server = app
    user = make_user()
    sender = await signed_in(server, user)
    await sender.start()
    message_id = str(uuid.uuid4())
    answer = await sender.send("hello there", message_id=message_id)
    thread_id = answer["threadId"]
    await sender.wait_event("task_end", count=2, timeout=30)

    # Another tab, resuming the thread: one user step in the history (under its own id, with
    # the client's id in acceptedIds), and a second send shows there once, under the client's id.
    other = await signed_in(server, user)
    await other.start(thread_id=thread_id)
    (thread,) = await other.wait_event("resume_thread", timeout=30)
    history_users = [s for s in thread["steps"] if s["type"] == "user_message"]
    assert [s["metadata"]["acceptedIds"] for s in history_users] == [[message_id]], thread["steps"]
    second_id = str(uuid.uuid4())
    await sender.send("and again", message_id=second_id)
    await other.wait_for(lambda c: any(m["id"] == second_id for m in c.named("new_message")), 30)
    await sender.wait_event("task_end", count=3, timeout=30)
    for tab in (sender, other):
        live_users = [m for m in tab.named("new_message") if m["type"] == "user_message"]
        assert [m["id"] for m in live_users].count(second_id) == 1, live_users
        assert "error" not in [name for name, _ in tab.events], tab.events
    await sender.disconnect()
    await other.disconnect()


async def test_the_frontends_other_events_get_no_error(app, make_user):
    _kind, server = app
    client = await signed_in(server, make_user())
    await client.start()
    await client.emit("fetch_favorites")  # what Chainlit's client emits on every connect
    assert await client.wait_event("set_favorites", timeout=30) == [[]]
    for event, payload in FRONTEND_EVENTS:
        await client.emit(event, payload)
    # Events of one socket are handled in order: once this is answered, so are the others.
    assert await client.call("fetch_favorites", timeout=30) is None
    names = [name for name, _ in client.events]
    assert "error" not in names, client.events
    assert names.count("set_favorites") == 2, client.events
    # The session is still usable.
    answer = await client.send("still here")
    assert "error" not in answer, answer
    await client.disconnect()


async def test_a_refused_send_comes_as_a_toast_when_no_ack_was_asked_for(app, limited, make_user):
    kind, _server = app
    client = await signed_in(limited[kind], make_user())
    await client.start()
    # Invalid: a Chainlit client (no ack) gets a toast; a client reading acks gets its ack.
    await client.emit("client_message", {"message": {"id": "not-a-uuid", "output": "hi"}})
    (toast,) = await client.wait_event("toast", timeout=30)
    assert toast == {"message": "message.id must be a UUID", "type": "error"}, toast
    acked = await client.call("client_message", {"message": {"id": "not-a-uuid", "output": "hi"}})
    assert acked == {"error": "message.id must be a UUID"}, acked
    # Over the send budget (one a minute): the first send goes, the second is refused.
    assert "error" not in await client.send("the one send")
    await client.emit("client_message", {"message": {"id": str(uuid.uuid4()), "output": "one more"}})
    await client.wait_event("toast", count=2, timeout=30)
    refused = client.named("toast")[1]
    assert refused["type"] == "error" and refused["message"].startswith("too many messages"), refused
    again = await client.call("client_message", {"message": {"id": str(uuid.uuid4()), "output": "and more"}})
    assert again["error"].startswith("too many messages") and again["retryAfter"] > 0, again
    # Both ways also keep the ``error`` event Tether's page reads (it may follow the ack).
    assert len(await client.wait_event("error", count=4, timeout=30)) == 4, client.named("error")
    assert len(client.named("toast")) == 2, client.named("toast")  # none for the acked refusals
    # An edit spends from the same budget before its frame is read: refused there, a toast too.
    await client.emit("edit_message", {"message": {"id": str(uuid.uuid4()), "output": "edited"}})
    await client.wait_event("toast", count=3, timeout=30)
    budget = client.named("toast")[2]
    assert budget["type"] == "error", budget
    assert budget["message"].startswith("too many messages: the rate is limited; try again in"), budget
    await client.disconnect()


async def test_an_edit_updates_and_removes_the_copies_chainlits_client_holds(server, make_user):
    """Hooks-API app (edits answer again with ``on_message``): the edited message and the
    user's later ones are updated and removed under the ids the client chose."""
    client = await signed_in(server, make_user())
    await client.start()
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    for message_id, text in ((first, "first"), (second, "second")):
        await client.emit(
            "client_message", {"message": {"id": message_id, "output": text}, "fileReferences": []}
        )
        await client.wait_text(f"echo: {text}", timeout=30)
    client.events.clear()
    await client.emit("edit_message", {"message": {"id": first, "output": "first, edited"}})
    await client.wait_text("echo: first, edited", timeout=30)
    updated = [m for m in client.named("update_message") if m["type"] == "user_message"]
    assert [(m["id"], m["output"]) for m in updated] == [(first, "first, edited")], updated
    removed_users = [m["id"] for m in client.named("delete_message") if m["type"] == "user_message"]
    assert removed_users == [second], client.named("delete_message")
    assert "error" not in [name for name, _ in client.events], client.events
    await client.disconnect()


async def test_a_second_connect_of_a_fresh_session_with_a_thread_to_resume_resumes_it(server, make_user):
    """Chainlit's frontend loading a thread's page connects twice under one sessionId: first
    without the thread (its first debounced connect; on_chat_start runs), then with the
    thread's id. On a loaded machine the first gets as far as ``connection_successful``: the
    second, a restore, must still resume the thread (the page showed nothing of it before)."""
    user = make_user()
    sender = await signed_in(server, user)
    await sender.start()
    thread_id = (await sender.send("the thread to resume"))["threadId"]
    await sender.wait_event("task_end", count=2, timeout=30)
    await sender.disconnect()

    page = ChatClient(server.url, sender.cookie)
    await page.start()  # the first connect: no thread known yet
    await page.wait_event("task_end", timeout=30)
    await page.disconnect()
    again = ChatClient(server.url, sender.cookie, session_id=page.session_id)
    await again.start(thread_id=thread_id)
    try:
        (thread,) = await again.wait_event("resume_thread", timeout=30)
    except TimeoutError:
        pytest.fail(f"the restored session never resumed the thread; events: {again.events!r}")
    assert thread["id"] == thread_id, thread
    shown = [s["output"] for s in thread["steps"] if s["type"] == "user_message"]
    assert shown == ["the thread to resume"], thread["steps"]
    answer = await again.send("and on")
    assert answer["threadId"] == thread_id, answer  # the session now writes to that thread
    await again.disconnect()
