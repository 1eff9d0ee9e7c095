"""The connect / resume lifecycle over a real socket (python-socketio client against daphne)."""

import asyncio
import json
import uuid

import pytest
import socketio
from asgiref.sync import sync_to_async

from sessions_app.models import SocketSession
from tests.support.client import ChatClient, signed_in
from tests.support.waiting import settle
from threads_app.models import AcceptedMessage, Step, Thread

pytestmark = pytest.mark.django_db(transaction=True)


@sync_to_async
def step_count(**filters) -> int:
    return Step.objects.filter(**filters).count()


@sync_to_async
def make_thread_with_history(user, messages: int) -> Thread:
    from threads_app.services import default_box_for, upsert_step

    thread = Thread.objects.create(
        owner=user, box=default_box_for(user), name="old chat", metadata={"color": "blue"}
    )
    for i in range(messages):
        kind = "user_message" if i % 2 == 0 else "assistant_message"
        upsert_step(thread.id, uuid.uuid4(), type=kind, name=kind, output=f"line {i}")
    return thread


async def test_fresh_connect_starts_once_and_reconnects_do_not_restart(server_each, make_user):
    server = server_each  # under daphne and under uvicorn
    client = await signed_in(server, make_user())
    await client.start()
    await client.wait_text("greeting")
    for _ in range(5):
        await client.disconnect()
        await client.start()
        await client.wait_event("task_end", count=1)
    await settle()
    assert len(server.hooks(client.session_id, "on_chat_start")) == 1
    assert client.texts().count("greeting") == 1
    await client.disconnect()


async def test_resume_runs_once_across_reconnects_and_keeps_user_session(server_each, make_user):
    server = server_each  # under daphne and under uvicorn
    user = make_user()
    thread = await make_thread_with_history(user, 4)
    client = await signed_in(server, user)
    await client.start(thread_id=str(thread.id))
    await client.wait_text("welcome back")
    resumed = client.named("resume_thread")
    assert len(resumed) == 1 and [s["output"] for s in resumed[0]["steps"]] == [f"line {i}" for i in range(4)]
    assert client.named("first_interaction")[0] == {"interaction": "resume", "thread_id": str(thread.id)}

    await client.send("ctx")
    await client.wait_for(lambda c: any(t.startswith('{"len"') for t in c.texts()))
    context_before = json.loads(next(t for t in client.texts() if t.startswith('{"len"')))
    await client.send("set mood cheerful")
    await client.wait_text("set mood")
    # The restored value came from the thread metadata.
    await client.send("get color")
    await client.wait_text("color=blue")

    for _ in range(5):
        await client.disconnect()
        await client.start(thread_id=str(thread.id))
        await client.wait_event("task_end", count=1)
    await client.send("get mood")
    await client.wait_text("mood=cheerful")
    client.events.clear()
    await client.send("ctx")
    await client.wait_for(lambda c: any(t.startswith('{"len"') for t in c.texts()))
    context_after = json.loads(next(t for t in client.texts() if t.startswith('{"len"')))

    assert len(server.hooks(client.session_id, "on_chat_resume")) == 1
    assert len(server.hooks(client.session_id, "on_chat_start")) == 0
    # Only the messages exchanged since were added; no history line was appended twice.
    assert context_after["ids"][: context_before["len"]] == context_before["ids"]
    assert len(set(context_after["ids"])) == len(context_after["ids"])
    assert context_after["len"] == context_before["len"] + 2 * 4  # (user, reply) for ctx, set, get, get
    await client.disconnect()


async def test_message_sent_in_on_chat_resume_arrives_after_resume_thread(server, make_user):
    user = make_user()
    thread = await make_thread_with_history(user, 2)
    client = await signed_in(server, user)
    await client.start(thread_id=str(thread.id))
    await client.wait_text("welcome back")
    names = [name for name, _ in client.events]
    assert names.index("resume_thread") < next(
        i
        for i, (name, data) in enumerate(client.events)
        if name == "new_message" and data["output"] == "welcome back"
    )
    await client.disconnect()


async def test_another_user_cannot_resume_the_thread_or_take_the_session(server, make_user):
    owner, intruder = make_user(), make_user()
    thread = await make_thread_with_history(owner, 2)
    mine = await signed_in(server, owner)
    await mine.start()
    await mine.wait_text("greeting")

    theirs = await signed_in(server, intruder)
    with pytest.raises(socketio.exceptions.ConnectionError, match="One or more namespaces failed"):
        await theirs.connect(thread_id=str(thread.id))
    thief = ChatClient(server.url, theirs.cookie, session_id=mine.session_id)
    with pytest.raises(socketio.exceptions.ConnectionError, match="One or more namespaces failed"):
        await thief.connect()
    # The owner's session is untouched.
    record = await SocketSession.objects.aget(pk=mine.session_id)
    assert record.user_id == owner.pk and record.socket_channel
    await mine.disconnect()


async def test_refusals_name_the_reason(server, make_user):
    anonymous = ChatClient(server.url)
    assert (await anonymous.refused({"sessionId": str(uuid.uuid4())}))["message"] == "authentication failed"
    client = await signed_in(server, make_user())
    assert (await client.refused({"sessionId": "not-a-uuid"}))["message"] == "sessionId must be a UUID"


async def test_same_message_id_twice_is_one_step(server, make_user):
    client = await signed_in(server, make_user())
    await client.start()
    message_id = str(uuid.uuid4())
    first = await client.send("hello", message_id)
    second = await client.send("hello", message_id)
    assert first == second
    await client.wait_text("echo: hello")
    await settle()
    # A resend after a lost ack is the same message: one step, one on_message, one reply.
    assert client.texts().count("echo: hello") == 1
    assert len(server.hooks(client.session_id, "on_message")) == 1
    thread = await Thread.objects.aget(pk=first["threadId"])
    assert await step_count(pk=AcceptedMessage.key(thread.pk, uuid.UUID(message_id))) == 1
    assert thread.name == "hello"
    await client.disconnect()


async def test_greeting_is_written_to_the_thread_on_first_interaction(server, make_user):
    user = make_user()
    client = await signed_in(server, user)
    await client.start()
    await client.wait_text("greeting")
    await settle()
    assert not await Thread.objects.filter(owner=user).aexists()
    answer = await client.send("first words")
    await client.wait_text("echo: first words")
    outputs = [s.output async for s in Step.objects.filter(thread_id=answer["threadId"]).order_by("seq")]
    assert outputs == ["greeting", "first words", "echo: first words"]
    await client.disconnect()


async def test_stop_cancels_the_running_message(server_each, make_user):
    server = server_each  # under daphne and under uvicorn
    client = await signed_in(server, make_user())
    await client.start()
    await client.wait_text("greeting")
    await client.send("sleep 30")
    await client.wait_event("task_start", count=2)  # greeting's turn, then this one
    client.events.clear()
    await client.emit("stop")
    await client.wait_text("Task manually stopped.")
    await client.wait_event("task_end")
    await settle(0.5)
    assert client.texts().count("Task manually stopped.") == 1
    assert "slept" not in client.texts()
    assert len(client.named("task_end")) == 1
    assert len(server.hooks(client.session_id, "on_stop")) == 1
    # The session still answers.
    await client.send("after stop")
    await client.wait_text("echo: after stop")
    await client.disconnect()


async def test_on_chat_end_runs_on_clear_only_once_and_not_on_drops(server, make_user):
    client = await signed_in(server, make_user())
    await client.start()
    await client.wait_text("greeting")
    await client.disconnect()
    await client.start()
    await client.wait_event("task_end")
    await settle()
    assert server.hooks(client.session_id, "on_chat_end") == []
    await client.emit("clear_session")
    await client.emit("clear_session")
    await client.wait_for(lambda c: bool(server.hooks(c.session_id, "on_chat_end")))
    await settle()
    assert len(server.hooks(client.session_id, "on_chat_end")) == 1
    assert not await SocketSession.objects.filter(pk=client.session_id).aexists()
    await client.disconnect()


async def test_session_expires_after_timeout_and_ends_once(server_factory, make_user):
    # A server of its own with a 1 s timeout, stopped at the end: its sweeper would expire
    # every other test's disconnected sessions (processes of one deployment share the timeout).
    server = server_factory.start(SESSION_TIMEOUT="1")
    try:
        client = await signed_in(server, make_user())
        await client.start()
        await client.wait_text("greeting")
        await client.disconnect()
        for _ in range(50):
            if server.hooks(client.session_id, "on_chat_end"):
                break
            await asyncio.sleep(0.1)
        await settle(1.5)
        assert len(server.hooks(client.session_id, "on_chat_end")) == 1
        assert not await SocketSession.objects.filter(pk=client.session_id).aexists()
        # A reconnect after expiry is a fresh session: it starts again.
        client.events.clear()
        await client.start()
        await client.wait_text("greeting")
        assert len(server.hooks(client.session_id, "on_chat_start")) == 2
        await client.disconnect()

    finally:
        server.stop()


async def test_edit_message_rewrites_the_message_drops_what_followed_and_answers_again(server, make_user):
    client = await signed_in(server, make_user())
    await client.start()
    await client.wait_text("greeting")
    first_id = str(uuid.uuid4())
    answer = await client.send("first", first_id)
    await client.wait_text("echo: first")
    await client.send("second")
    await client.wait_text("echo: second")
    client.events.clear()
    edited = await client.call("edit_message", {"message": {"id": first_id, "output": "first, edited"}})
    assert edited["messageId"] == first_id
    await client.wait_text("echo: first, edited")
    deleted = {m["output"] for m in client.named("delete_message")}
    assert deleted == {"echo: first", "second", "echo: second"}
    outputs = [s.output async for s in Step.objects.filter(thread_id=answer["threadId"]).order_by("seq")]
    assert outputs == ["greeting", "first, edited", "echo: first, edited"]
    bad = await client.call("edit_message", {"message": {"id": str(uuid.uuid4()), "output": "x"}})
    assert "error" in bad
    await client.disconnect()


async def test_chat_settings_change_is_kept_in_the_user_session(server, make_user):
    client = await signed_in(server, make_user())
    await client.start()
    answer = await client.send("hello")
    await client.wait_text("echo: hello")
    await client.call("chat_settings_change", {"temperature": 0.2})
    thread = await Thread.objects.aget(pk=answer["threadId"])
    assert thread.chat_settings == {"temperature": 0.2}
    assert thread.metadata["chat_settings"] == {"temperature": 0.2}
    bad = await client.call("chat_settings_change", ["not", "an", "object"])
    assert "error" in bad
    await client.disconnect()


async def test_a_reconnect_right_after_task_end_hears_task_end(server, make_user):
    """The turn claim is released before task_end goes out, so a client that reconnects as
    soon as it heard task_end is never told a turn is still running (and left waiting for a
    task_end that never comes)."""
    client = await signed_in(server, make_user())
    await client.start()
    await client.wait_text("greeting")
    await client.wait_event("task_end", count=2)  # connection_successful's, then the greeting's
    for i in range(8):
        client.events.clear()
        await client.send(f"turn {i}")
        await client.wait_event("task_end")  # this turn's
        assert f"echo: turn {i}" in client.texts()
        await client.disconnect()
        client.events.clear()
        await client.start()
        await client.wait_for(lambda c: c.named("task_start") or c.named("task_end"))
        first = next(name for name, _ in client.events if name in ("task_start", "task_end"))
        assert first == "task_end", f"reconnect {i} was told a turn is running"
    await client.disconnect()
