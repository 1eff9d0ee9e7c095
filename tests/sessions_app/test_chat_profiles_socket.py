"""A chat's profile on the wire (python-socketio client against daphne running
``examples.profiles_app``, whose hooks answer by ``chat.user_session.get("chat_profile")``):
the client asks for it in the socket auth (``chatProfile``, URL-encoded, as Chainlit's client
does); it reaches on_chat_start and on_message, is kept with the thread from its first message
and restored on resume; it cannot change afterwards; an unknown one falls back to the default."""

import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sessions_app.models import SocketSession
from tests.support.client import ChatClient, signed_in
from tests.support.waiting import wait_until_async
from threads_app.models import Thread

pytestmark = pytest.mark.django_db(transaction=True)

ECHO_GREETING = "Hi! This chat uses the Echo profile."
REVERSE_GREETING = "Hi! This chat uses the Reverse profile."


@pytest.fixture(scope="module")
def profiles_server(server_factory):
    return server_factory.start(CHAT_APP="examples.profiles_app")


@sync_to_async
def thread_row(thread_id: str) -> Thread:
    return Thread.objects.get(pk=thread_id)


@sync_to_async
def session_profile(session_id: str) -> str:
    return SocketSession.objects.get(pk=session_id).chat_profile


async def persisted_profile(thread_id: str, profile: str) -> bool:
    return bool((await thread_row(thread_id)).metadata.get("chat_profile") == profile)


async def first_message(client: ChatClient, text: str) -> str:
    """Send the chat's first message; returns the thread it created."""
    answer = await client.send(text)
    return str(answer["threadId"])


async def test_the_chosen_profile_reaches_on_chat_start_and_on_message_and_the_thread(
    profiles_server: Any, make_user: Any
) -> None:
    client = await signed_in(profiles_server, make_user())
    await client.start(chatProfile="Reverse")
    await client.wait_text(REVERSE_GREETING)
    thread_id = await first_message(client, "stressed")
    await client.wait_text("Reverse: desserts")
    assert (await thread_row(thread_id)).chat_profile == "Reverse"  # from its creation on
    # ... and in the user session persisted at the end of the turn (just after the reply).
    await wait_until_async(lambda: persisted_profile(thread_id, "Reverse"))
    await client.send("live")
    await client.wait_text("Reverse: evil")
    assert ECHO_GREETING not in client.texts()
    await client.disconnect()


async def test_the_profile_is_kept_on_resume_and_cannot_change_after_the_first_message(
    profiles_server: Any, make_user: Any
) -> None:
    user = make_user()
    client = await signed_in(profiles_server, user)
    await client.start(chatProfile="Reverse")
    thread_id = await first_message(client, "abc")
    await client.wait_text("Reverse: cba")

    # The same session reconnecting with another profile keeps its own.
    await client.disconnect()
    await client.start(chatProfile="Echo")
    await client.wait_event("task_end")
    await client.send("xyz")
    await client.wait_text("Reverse: zyx")
    assert await session_profile(client.session_id) == "Reverse"
    await client.disconnect()

    # A new session resuming the thread gets the thread's profile, whatever it asks for.
    resumed = ChatClient(profiles_server.url, client.cookie)
    await resumed.start(thread_id=thread_id, chatProfile="Echo")
    await resumed.wait_text("Welcome back. Still the Reverse profile.")
    assert [
        s["output"] for s in resumed.named("resume_thread")[0]["steps"] if s["type"] == "user_message"
    ] == [
        "abc",
        "xyz",
    ]
    await resumed.send("hello")
    await resumed.wait_text("Reverse: olleh")
    assert "Echo: hello" not in resumed.texts()
    await resumed.wait_event("task_end", count=3)  # connected, resumed, answered
    await resumed.disconnect()  # persists the user session
    await wait_until_async(lambda: persisted_profile(thread_id, "Reverse"))
    assert (await thread_row(thread_id)).chat_profile == "Reverse"


async def test_an_unknown_or_missing_profile_falls_back_to_the_default(
    profiles_server: Any, make_user: Any
) -> None:
    user = make_user()
    unknown = await signed_in(profiles_server, user)
    await unknown.start(chatProfile="Administrator")
    await unknown.wait_text(ECHO_GREETING)
    thread_id = await first_message(unknown, "hi")
    await unknown.wait_text("Echo: hi")
    assert (await thread_row(thread_id)).chat_profile == "Echo"
    await unknown.disconnect()

    missing = ChatClient(profiles_server.url, unknown.cookie)
    await missing.start()
    await missing.wait_text(ECHO_GREETING)
    await missing.disconnect()


async def test_the_profile_name_is_url_decoded_and_a_nul_is_refused(
    profiles_server: Any, make_user: Any
) -> None:
    client = await signed_in(profiles_server, make_user())
    await client.start(chatProfile="Rev%65rse")
    await client.wait_text(REVERSE_GREETING)
    await client.disconnect()
    refusal = await client.refused({"sessionId": str(uuid.uuid4()), "chatProfile": "Echo%00"})
    assert refusal == {"message": "chatProfile must not contain NUL characters"}


@sync_to_async
def thread_with_profile(user: Any, profile: str) -> str:
    from threads_app.services import ensure_thread

    thread, _ = ensure_thread(user, uuid.uuid4(), name="made elsewhere", chat_profile=profile)
    return str(thread.pk)


async def test_a_session_opening_a_thread_takes_the_threads_profile_not_the_one_it_asks_for(
    profiles_server: Any, make_user: Any
) -> None:
    """The thread row's profile decides, also when its metadata holds none (a thread whose
    first turn has not ended yet, or one written by another client)."""
    user = make_user()
    thread_id = await thread_with_profile(user, "Reverse")
    client = await signed_in(profiles_server, user)
    await client.start(thread_id=thread_id, chatProfile="Echo")
    await client.wait_text("Welcome back. Still the Reverse profile.")
    await client.send("drawer")
    await client.wait_text("Reverse: reward")
    assert await session_profile(client.session_id) == "Reverse"
    await client.disconnect()
