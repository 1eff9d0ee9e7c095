"""Which hooks-API sends have their attachments read for their turn (issue 22): a send that
named no upload reads none; a revived one (``retry`` of a failed send, whose files were
attached at its first acceptance) reads them, whatever its retry names. A send that named
uploads, and what ``on_message`` gets of them, is ``tests/media_app/test_elements_socket.py``'s;
a send taken over by recovery (whose upload ids are not known there) keeps
``answer_send``'s default, which reads them."""

import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sessions_app import hook_sends
from threads_app.models import AcceptedMessage, Thread
from threads_app.services import default_box_for, fail_sends

pytestmark = pytest.mark.django_db(transaction=True)


@dataclass
class AnsweringSession:
    """What ``accept_and_answer`` uses of a LiveSession; keeps what it was asked to answer."""

    user: Any
    id: uuid.UUID = field(default_factory=uuid.uuid4)
    answered: list[tuple[uuid.UUID, bool]] = field(default_factory=list)

    def will_queue(self) -> bool:
        return False

    async def reserve_turn(self) -> bool:
        # Busy in this process: every send takes the path that queues its turn (a send
        # accepted with its turn claimed reads no attachments either, test_statement_counts).
        return False

    def answer_send(self, send: AcceptedMessage, *, with_attachments: bool = True) -> None:
        self.answered.append((send.pk, with_attachments))


@pytest.fixture
def settings_in_memory(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


async def test_only_sends_that_may_carry_files_read_them(settings_in_memory, make_user):
    user = make_user()
    thread = await sync_to_async(lambda: Thread.objects.create(owner=user, box=default_box_for(user)))()
    live: Any = AnsweringSession(user)
    message_id = uuid.uuid4()

    await hook_sends.accept_and_answer(live, thread, message_id, "no files")
    (accepted_id, with_attachments), *_ = live.answered
    assert with_attachments is False

    await hook_sends.accept_and_answer(live, thread, message_id, "no files")  # a repeat runs nothing
    assert len(live.answered) == 1

    await sync_to_async(fail_sends)([accepted_id], AcceptedMessage.Failure.SERVER)
    await hook_sends.accept_and_answer(live, thread, message_id, "no files", retry=True)
    assert live.answered[1] == (accepted_id, True)
