"""A box edited in the admin answers its next turn with the new engine, without a restart.

The sends go through the real send path (``chats.accept_and_submit``: acceptance record, box
claim, the pool, a ChatSession, the engine) in this process; the admin edit is a POST to the
box's change form. The echo engine is a real subprocess, the OpenAI engine talks to a local
OpenAI-compatible server (``FakeChatCompletions``).
"""

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from sessions_app.runtime import chats
from sessions_app.runtime.pool import pools
from sessions_app.state import process_state
from tests.support.fake_openai import FakeChatCompletions
from threads_app.models import AcceptedMessage, Box, Step, Thread
from threads_app.services import default_box_for

pytestmark = pytest.mark.django_db(transaction=True)

REPLY_WAIT = 15.0


@pytest.fixture
async def runtime(tmp_path, settings) -> AsyncIterator[None]:
    """This process runs the boxes; its pools are closed and forgotten afterwards."""
    settings.ECHO_STATE_DIR = tmp_path / "echo"
    yield
    for pool in pools.all():
        await pool.close()
    process_state.reset()


@sync_to_async
def setup(django_user_model: Any) -> tuple[Client, Any, Box, Thread]:
    admin = django_user_model.objects.create_superuser(username="ops", password="pw-for-tests-1")
    client = Client()
    client.force_login(admin)
    user = django_user_model.objects.create_user(username="dana", password="pw-for-tests-1")
    box = default_box_for(user)
    return client, user, box, Thread.objects.create(owner=user, box=box, name="t")


@sync_to_async
def edit_box(client: Client, box: Box, engine: str, options: dict[str, Any]) -> None:
    form = {
        "owner": box.owner_id,
        "name": box.name,
        "engine": engine,
        "engine_options": json.dumps(options),
        "webhook_url": "",
        "_save": "Save",
    }
    response = client.post(f"/admin/threads_app/box/{box.pk}/change/", form)
    assert response.status_code == 302, response.content.decode()


@sync_to_async
def reply_after(thread: Thread, user_step: uuid.UUID) -> str | None:
    """The assistant reply transcribed after the user step ``user_step``, if any yet."""
    seq = Step.objects.filter(pk=user_step).values_list("seq", flat=True).first()
    if seq is None:
        return None
    reply = Step.objects.filter(thread=thread, seq__gt=seq, type="assistant_message").first()
    return reply.output if reply is not None else None


async def say(user: Any, thread: Thread, text: str) -> str:
    """Send ``text`` the way the socket and the HTTP API do; the reply that lands for it."""
    message_id = uuid.uuid4()
    answer = await chats.accept_and_submit(user=user, thread=thread, message_id=message_id, text=text)
    assert answer["queued"] is False
    loop = asyncio.get_running_loop()
    deadline = loop.time() + REPLY_WAIT
    while (reply := await reply_after(thread, AcceptedMessage.key(thread.pk, message_id))) is None:
        assert loop.time() < deadline, f"no reply to {text!r}"
        await asyncio.sleep(0.05)
    return reply


async def test_an_engine_changed_in_the_admin_answers_the_next_turn(
    runtime: None, fake: FakeChatCompletions, django_user_model: Any
) -> None:
    client, user, box, thread = await setup(django_user_model)
    assert await say(user, thread, "hello") == "Echo #1: hello"
    assert await say(user, thread, "twice") == "Echo #2: twice"  # one echo conversation

    openai = {"base_url": fake.url, "api_key": "test-key", "model": "model-a", "max_retries": 0}
    await edit_box(client, box, "openai", openai)

    assert await say(user, thread, "after the edit") == "You said: after the edit"
    # A fresh conversation: the echo engine's conversation id was not handed to OpenAI.
    assert fake.requests[-1]["model"] == "model-a"
    assert [m["content"] for m in fake.requests[-1]["messages"]] == ["after the edit"]

    # Options alone: the same engine goes on with the same conversation (its history resumed).
    await edit_box(client, box, "openai", {**openai, "model": "model-b"})

    assert await say(user, thread, "and now") == "You said: and now"
    assert fake.requests[-1]["model"] == "model-b"
    assert {"role": "assistant", "content": "You said: after the edit"} in fake.requests[-1]["messages"]

    # And back: the echo engine starts a new conversation of its own.
    await edit_box(client, box, "echo", {})
    assert await say(user, thread, "echo again") == "Echo #1: echo again"
    assert len(fake.requests) == 2
