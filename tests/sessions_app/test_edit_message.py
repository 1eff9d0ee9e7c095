"""Editing a sent message (``edit_message``, Chainlit's payload ``{message: {id, output}}``)
over a real daphne and python-socketio clients, for both kinds of app.

Hooks-API apps: the message is rewritten, every later step of the thread goes (whichever tab
wrote it), every tab is told (``delete_message`` / ``update_message`` on the thread's bus),
``on_message`` answers the edited text with a chat context that has forgotten the rest, and a
reload shows the edited conversation. Engine-runtime apps: where the thread runs, the message
and what followed it leave the transcript, the engine forgets those turns (the echo engine counts
again from there, the OpenAI-compatible one rebuilds its history from the cut transcript), and
the message is answered again; an engine that cannot forget (Claude Code) refuses.
"""

import asyncio
import json
import uuid
from typing import Any

import pytest

from sessions_app.runtime import chats
from tests.support.client import signed_in
from threads_app.models import Box, Step

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


async def outputs(thread_id: str) -> list[str]:
    return [s.output async for s in Step.objects.filter(thread_id=thread_id).order_by("seq")]


def ended(tab: Any) -> bool:
    """The tab's last turn ended (its last ``task_start`` has a ``task_end`` after it)."""
    names = [name for name, _ in tab.events]
    return "task_start" not in names or "task_end" in names[len(names) - names[::-1].index("task_start") :]


async def resumed_outputs(server: Any, user: Any, thread_id: str) -> list[str]:
    """What a reload (a new tab resuming the thread) shows."""
    tab = await signed_in(server, user)
    await tab.start(thread_id=thread_id)
    (thread,) = await tab.wait_event("resume_thread", timeout=30)
    await tab.disconnect()
    return [s["output"] for s in thread["steps"]]


async def test_an_edit_replaces_the_rest_of_the_thread_in_every_tab_and_after_a_reload(server, make_user):
    user = make_user()
    sender = await signed_in(server, user)
    await sender.start()
    await sender.wait_text("greeting")
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    thread_id = (await sender.send("first", first))["threadId"]
    await sender.wait_text("echo: first")
    await sender.send("second", second)
    await sender.wait_text("echo: second")
    # Another tab of the thread writes to it too: its turn's steps go with the edit as well.
    other = await signed_in(server, user)
    await other.start(thread_id=thread_id)
    await other.wait_event("resume_thread", timeout=30)
    third = str(uuid.uuid4())
    assert "error" not in await other.send("third", third)
    await other.wait_text("echo: third")
    assert await outputs(thread_id) == [
        "greeting",
        "first",
        "echo: first",
        "second",
        "echo: second",
        "welcome back",  # the lifecycle app's on_chat_resume, for the other tab
        "third",
        "echo: third",
    ]

    sender.events.clear()
    other.events.clear()
    # The edited text is ``ctx``: the answer lists the chat context on_message sees.
    edited = await sender.call("edit_message", {"message": {"id": first, "output": "ctx"}})
    assert edited == {"threadId": thread_id, "messageId": first}, edited
    await sender.wait_for(lambda c: any(t.startswith('{"len"') for t in c.texts()), 30)
    context = json.loads(next(t for t in sender.texts() if t.startswith('{"len"')))
    assert context["len"] == 2, context  # the greeting and the edited message: nothing that followed it

    later = {"echo: first", "second", "echo: second", "welcome back", "third", "echo: third"}
    removed = {m["output"] for m in sender.named("delete_message")}
    assert removed == later, sender.named("delete_message")
    # The other tab hears the same removals and the rewritten message on the thread's bus.
    await other.wait_for(lambda c: len(c.named("delete_message")) == len(later), 30)
    assert {m["output"] for m in other.named("delete_message")} == later, other.named("delete_message")
    # User messages are named by the id their client chose (what Chainlit's client holds).
    removed_users = {m["id"] for m in other.named("delete_message") if m["type"] == "user_message"}
    assert removed_users == {second, third}, other.named("delete_message")
    await other.wait_for(lambda c: any(m["id"] == first for m in c.named("update_message")), 30)
    (rewritten,) = [m for m in other.named("update_message") if m["id"] == first]
    assert rewritten["output"] == "ctx", rewritten

    kept = await outputs(thread_id)
    assert kept[:2] == ["greeting", "ctx"] and len(kept) == 3 and kept[2].startswith('{"len"'), kept
    # ... and the new answer, live and once, as the editing tab does (not only after a reload).
    await other.wait_for(lambda c: kept[2] in c.texts(), 30)
    answers = [m for m in other.named("new_message") if m["output"] == kept[2]]
    (mine,) = [m for m in sender.named("new_message") if m["output"] == kept[2]]
    assert answers == [mine], other.events
    assert await resumed_outputs(server, user, thread_id) == kept
    for tab in (sender, other):
        assert "error" not in [name for name, _ in tab.events], tab.events
        await tab.disconnect()


async def test_an_edit_names_a_message_of_this_thread_only(server, make_user):
    owner, stranger = make_user(), make_user()
    mine = await signed_in(server, owner)
    await mine.start()
    own_id = str(uuid.uuid4())
    thread_id = (await mine.send("mine", own_id))["threadId"]
    await mine.wait_text("echo: mine")
    theirs = await signed_in(server, stranger)
    await theirs.start()
    await theirs.send("theirs")
    await theirs.wait_text("echo: theirs")
    for tab in (mine, theirs):  # their turns are over: an edit is refused for its id alone
        await tab.wait_for(ended, 30)

    # Another user's message id, an unknown id, the assistant's reply, and empty text.
    foreign = await theirs.call("edit_message", {"message": {"id": own_id, "output": "hijacked"}})
    assert foreign == {"error": "no user message with this id in the thread"}, foreign
    unknown = await mine.call("edit_message", {"message": {"id": str(uuid.uuid4()), "output": "x"}})
    assert unknown == {"error": "no user message with this id in the thread"}, unknown
    reply_id = next(m["id"] for m in mine.named("new_message") if m["output"] == "echo: mine")
    not_users = await mine.call("edit_message", {"message": {"id": reply_id, "output": "x"}})
    assert not_users == {"error": "no user message with this id in the thread"}, not_users
    empty = await mine.call("edit_message", {"message": {"id": own_id, "output": "   "}})
    assert empty == {"error": "an edited message needs text"}, empty
    assert await outputs(thread_id) == ["greeting", "mine", "echo: mine"]
    await mine.disconnect()
    await theirs.disconnect()


async def test_an_edit_waits_for_the_reply_in_progress(server, make_user):
    client = await signed_in(server, make_user())
    await client.start()
    first = str(uuid.uuid4())
    thread_id = (await client.send("first", first))["threadId"]
    await client.wait_text("echo: first")
    await client.wait_for(ended, 30)
    started = len(client.named("task_start"))
    await client.send("sleep 2")
    await client.wait_event("task_start", count=started + 1, timeout=30)  # the sleep's turn
    busy = await client.call("edit_message", {"message": {"id": first, "output": "edited"}})
    assert busy == {"error": "wait for the reply (or stop it) before editing a message"}, busy
    await client.wait_text("slept", timeout=30)
    assert (await outputs(thread_id))[1:] == ["first", "echo: first", "sleep 2", "slept"]
    await client.disconnect()


async def replied(client: Any, text: str) -> None:
    await client.wait_for(lambda c: text in c.replies(), 30)


def engine_shown(tab: Any) -> list[tuple[str, str, str]]:
    """What a tab of an engine chat was told, as (event, id, output) for the message events."""
    return [
        (name, data["id"], data.get("output", ""))
        for name, data in tab.events
        if name in ("new_message", "update_message", "delete_message")
    ]


async def test_an_engine_chat_edit_forgets_what_followed_in_every_tab_the_engine_too_and_after_a_reload(
    engine_server, make_user
):
    """The echo engine counts a conversation's turns: the edited second message is answered
    as turn 2 again (the engine forgot turns 2 and 3), once, and both tabs drop what followed."""
    user = make_user()
    sender = await signed_in(engine_server, user)
    await sender.start()
    ids = [str(uuid.uuid4()) for _ in range(3)]
    thread_id = (await sender.send("one", ids[0]))["threadId"]
    await replied(sender, "Echo #1: one")
    await sender.send("two", ids[1])
    await replied(sender, "Echo #2: two")
    await sender.send("three", ids[2])
    await replied(sender, "Echo #3: three")
    other = await signed_in(engine_server, user)
    await other.start(thread_id=thread_id)
    await other.wait_event("resume_thread", timeout=30)
    removed = [s.pk async for s in Step.objects.filter(thread_id=thread_id, seq__gte=3).order_by("seq")]
    assert len(removed) == 4, removed  # two, its reply, three, its reply

    sender.events.clear()
    other.events.clear()
    edited = await sender.call("edit_message", {"message": {"id": ids[1], "output": "deux"}})
    assert edited == {"threadId": thread_id, "messageId": ids[1]}, edited
    for tab in (sender, other):
        await replied(tab, "Echo #2: deux")
    await asyncio.sleep(0.5)  # a second answer would have come by now
    for tab in (sender, other):
        shown = engine_shown(tab)
        deleted = [i for name, i, _ in shown if name == "delete_message"]
        # User steps are deleted under the ids their clients chose, replies by their own.
        assert deleted == [ids[1], str(removed[1]), ids[2], str(removed[3])], shown
        first_new = next(n for n, (name, *_) in enumerate(shown) if name == "new_message")
        assert all(name == "delete_message" for name, *_ in shown[:first_new]), shown
        assert ("new_message", ids[1], "deux") in shown, shown
        assert [r for r in tab.replies() if r.startswith("Echo")] == ["Echo #2: deux"], shown
    after = ["one", "Echo #1: one", "deux", "Echo #2: deux"]
    assert await outputs(thread_id) == after
    assert await resumed_outputs(engine_server, user, thread_id) == after
    # The conversation goes on from the edit: the engine counts on from turn 2.
    await sender.send("four")
    await replied(sender, "Echo #3: four")
    await sender.disconnect()
    await other.disconnect()


async def test_an_engine_chat_refuses_an_edit_while_a_turn_runs_and_for_an_engine_that_cannot_forget(
    engine_server, make_user
):
    user = make_user()
    client = await signed_in(engine_server, user)
    await client.start()
    first = str(uuid.uuid4())
    thread_id = (await client.send("hello", first))["threadId"]
    await replied(client, "Echo #1: hello")
    await client.send("!slow 0.3\na reply that takes a while")
    await client.wait_event("stream_start", timeout=30)
    busy = await client.call("edit_message", {"message": {"id": first, "output": "edited"}})
    assert busy == {"error": chats.EDIT_WAITS_FOR_TURN}, busy
    await replied(client, "Echo #2: a reply that takes a while")
    before = await outputs(thread_id)
    # Claude Code keeps its own session of the conversation, which cannot be cut.
    await Box.objects.filter(threads__pk=thread_id).aupdate(engine="claude")
    refused = await client.call("edit_message", {"message": {"id": first, "output": "edited"}})
    assert refused == {"error": chats.EDIT_REFUSED_BY_ENGINE}, refused
    # Chainlit's client asks for no ack: it is told with a toast.
    await client.emit("edit_message", {"message": {"id": first, "output": "edited"}})
    (toast,) = await client.wait_event("toast", timeout=30)
    assert toast == {"message": chats.EDIT_REFUSED_BY_ENGINE, "type": "error"}, toast
    assert await outputs(thread_id) == before
    assert not client.named("delete_message"), client.named("delete_message")
    missing = await client.call("edit_message", {"message": {"id": str(uuid.uuid4()), "output": "x"}})
    assert missing == {"error": "no user message with this id in the thread"}, missing
    await client.disconnect()


async def test_an_openai_engine_chat_answers_an_edit_from_the_history_before_the_message(
    engine_server, make_user, fake
):
    """The OpenAI-compatible engine rebuilds its history from the transcript: the request that
    answers the edit holds the turns before the edited message and the new text, nothing else."""
    user = make_user()
    client = await signed_in(engine_server, user)
    await client.start()
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    thread_id = (await client.send("warm up", str(uuid.uuid4())))["threadId"]
    await replied(client, "Echo #1: warm up")
    options = {"base_url": fake.url, "api_key": "test-key", "model": "model-a", "max_retries": 0}
    await Box.objects.filter(threads__pk=thread_id).aupdate(engine="openai", engine_options=options)
    await client.send("alpha", first)
    await replied(client, "You said: alpha")
    await client.send("beta", second)
    await replied(client, "You said: beta")
    assert "error" not in await client.call("edit_message", {"message": {"id": first, "output": "gamma"}})
    await replied(client, "You said: gamma")
    history = [(m["role"], m["content"]) for m in fake.requests[-1]["messages"]]
    assert history == [
        ("user", "warm up"),
        ("assistant", "Echo #1: warm up"),
        ("user", "gamma"),
    ], fake.requests
    assert await outputs(thread_id) == ["warm up", "Echo #1: warm up", "gamma", "You said: gamma"]
    await client.disconnect()


@pytest.fixture(scope="module")
def asks_server(server_factory: Any) -> Any:
    return server_factory.start(CHAT_APP="tests.apps.asks_app")


async def test_an_edit_whose_answer_asks_shows_the_question_and_answer_once_in_another_tab(
    asks_server, make_user
):
    user = make_user()
    sender = await signed_in(asks_server, user)
    await sender.start()
    first = str(uuid.uuid4())
    thread_id = (await sender.send("first", first))["threadId"]
    await sender.wait_for(ended, 30)
    other = await signed_in(asks_server, user)
    await other.start(thread_id=thread_id)
    await other.wait_event("resume_thread", timeout=30)
    await other.wait_for(ended, 30)
    other.events.clear()

    assert "error" not in await sender.call("edit_message", {"message": {"id": first, "output": "ask name"}})
    (ask,) = await sender.wait_event("ask", timeout=30)
    answered = await sender.call("ask_answer", {"askId": ask["spec"]["askId"], "answer": {"output": "Ann"}})
    assert answered.get("success"), answered
    await other.wait_text("Hello, Ann!", timeout=30)
    await sender.wait_for(ended, 30)
    await asyncio.sleep(0.5)  # a second copy of anything would have come by now
    shown = [(m["id"], m["output"]) for m in other.named("new_message")]
    assert sorted(set(shown)) == sorted(shown), other.events  # nothing twice
    assert [o for _, o in shown] == ["What is your name?", "Ann", "Hello, Ann!"], other.events
    assert len(other.named("ask")) == 1, other.events
    # What the other tab shows live is what a reload reads.
    assert await resumed_outputs(asks_server, user, thread_id) == ["ask name", *[o for _, o in shown]]
    for tab in (sender, other):
        assert "error" not in [name for name, _ in tab.events], tab.events
        await tab.disconnect()
