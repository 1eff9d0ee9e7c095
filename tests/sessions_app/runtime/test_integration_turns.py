"""Integration turns in the box's owner (``sessions_app.runtime.integration_turns``): a
recovery pass never takes a turn of this process for one a dead owner cut."""

import asyncio
import threading
import uuid

import pytest
from asgiref.sync import sync_to_async

from sessions_app.runtime import integration_turns as module
from sessions_app.runtime.chat_session import SERVER_STOPPED_TEXT
from sessions_app.runtime.integration_turns import ACCEPTED, accept_here, integration_turns, recover
from sessions_app.runtime.ownership import owner_of
from sessions_app.runtime.pool import pools
from tests.sessions_app.runtime.conftest import transcript
from tests.support.waiting import wait_until
from threads_app.models import AcceptedMessage

pytestmark = pytest.mark.django_db(transaction=True)


@sync_to_async
def open_sends(message_id: uuid.UUID) -> list[AcceptedMessage]:
    return list(AcceptedMessage.objects.filter(client_id=message_id))


@pytest.fixture
def engine_app(settings, monkeypatch, tmp_path) -> None:
    """The default (engine-runtime) app on an in-memory channel layer, the echo engine's state
    in the test's own directory: nothing an earlier test left in this process's Redis state."""
    settings.CHAT_APP = "sessions_app.default_app"
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    monkeypatch.setenv("ECHO_STATE_DIR", str(tmp_path / "echo"))


async def test_a_send_whose_outcome_is_being_recorded_is_not_closed_as_cut(
    make_thread, echo, engine_app, monkeypatch
):
    """The recovery pass reads the box's open sends: one whose turn has ended here and whose
    outcome is on its way to the database is transcribed with no outcome, as a cut turn's is.
    It is left alone, and its answer is the only one in the transcript."""
    thread = await make_thread()
    recording, go_on = threading.Event(), threading.Event()
    settle = module.settle_and_queue_delivery

    def held_settle(*args: object) -> bool:
        if not recording.is_set():
            recording.set()
            go_on.wait(10)
        return settle(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(module, "settle_and_queue_delivery", held_settle)
    message_id = uuid.uuid4()
    request = {
        "thread": str(thread.pk),
        "user": make_thread.user.pk,
        "author": make_thread.user.get_username(),
        "message": str(message_id),
        "text": "hello",
    }
    # Held here, as ``submit`` holds it before it hands over: a box nobody runs is any live
    # server's to recover, and the test's servers share this database (CI saw engine_server
    # close this turn as cut while its outcome was held).
    assert (await owner_of(("box", thread.box_id)))[1]
    try:
        assert await accept_here(request) == ACCEPTED
        await wait_until(recording.is_set, timeout=10)
        sends = await open_sends(message_id)
        assert [(s.state, s.outcome, s.failure) for s in sends] == [("transcribed", "", "")], sends
        assert await recover(thread.box_id, sends) == 0
    finally:
        go_on.set()
        await asyncio.gather(*integration_turns.tasks)
        for pool in pools.all():
            await pool.close()
    outputs = [s.output for s in await transcript(thread) if s.type == "assistant_message"]
    assert outputs == ["Echo #1: hello"], outputs
    assert SERVER_STOPPED_TEXT not in outputs
    send = await sync_to_async(AcceptedMessage.objects.get)(client_id=message_id)
    assert send.outcome == AcceptedMessage.Outcome.REPLIED
