"""A hooks-API reply deferred to the turn's release (``sessions_app.replies``) is never shown
before it is committed, and never held back by a hook that runs on after sending it."""

import uuid
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest

from tests.sessions_app.test_statement_counts import signed_in_socket
from tests.support.wire import InProcessSocket
from threads_app.models import AcceptedMessage, Step

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
async def sock(settings, make_user, monkeypatch, tmp_path) -> AsyncIterator[InProcessSocket]:
    monkeypatch.setenv("HOOK_LOG", str(tmp_path / "hooks.jsonl"))
    async for opened in signed_in_socket(settings, make_user, "tests.apps.lifecycle_app"):
        yield opened


async def reply_to(sock: InProcessSocket, text: str, ack_id: int) -> dict[str, Any]:
    await sock.call("client_message", {"message": {"id": str(uuid.uuid4()), "output": text}}, ack_id=ack_id)
    while True:
        (step,) = await sock.event("new_message", timeout=10)
        if step["type"] == "assistant_message":
            return cast(dict[str, Any], step)


async def test_a_reply_that_ends_the_hook_is_committed_before_it_is_shown(sock):
    await reply_to(sock, "first", 1)
    await sock.event("task_end")
    shown = await reply_to(sock, "second", 2)
    assert shown["output"] == "echo: second"
    stored = await Step.objects.filter(pk=shown["id"]).afirst()
    assert stored is not None, "the reply was shown before its row was written"
    assert stored.seq == shown["seq"]


async def test_a_hook_that_runs_on_after_its_send_shows_the_reply_at_once(sock):
    await reply_to(sock, "first", 1)
    await sock.event("task_end")
    shown = await reply_to(sock, "replythensleep 5", 2)  # the hook sleeps 5 s after its send
    assert shown["output"] == "replied"
    # The hook is still asleep: the reply is in the transcript already (a crash now keeps it).
    assert await Step.objects.filter(pk=shown["id"], output="replied").aexists()
    send = await AcceptedMessage.objects.filter(text="replythensleep 5").aget()
    assert send.outcome == "", "the turn is still running"
