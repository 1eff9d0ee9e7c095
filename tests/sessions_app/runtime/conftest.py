"""Fixtures for the runtime tests: a real thread to write the transcript to, the echo engine."""

import uuid

import pytest
from asgiref.sync import sync_to_async

from sessions_app.runtime.engines.echo import EchoEngine
from threads_app.models import AcceptedMessage, Step, Thread
from threads_app.services import default_box_for


class Sink:
    """Collects what a session emits to the web (the audience stand-in of a unit test)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, object]] = []

    async def __call__(self, event: str, data: object) -> None:
        self.events.append((event, data))

    def named(self, event: str) -> list[object]:
        return [data for name, data in self.events if name == event]


@pytest.fixture
def sink() -> Sink:
    return Sink()


@pytest.fixture
def echo(tmp_path, settings):
    settings.ECHO_STATE_DIR = tmp_path / "echo"
    return EchoEngine({"state_dir": str(tmp_path / "echo")})


@pytest.fixture
def make_thread(transactional_db, django_user_model):
    user = django_user_model.objects.create_user(username=f"rt-{uuid.uuid4().hex[:6]}", password="x")

    @sync_to_async
    def make(name: str = "t") -> Thread:
        return Thread.objects.create(owner=user, box=default_box_for(user), name=name)

    make.user = user  # type: ignore[attr-defined]  # an attribute on the function, for tests that need the owner
    return make


@sync_to_async
def accept(thread: Thread, text: str) -> uuid.UUID:
    """An acceptance record, as the send path makes before the runtime sees a message."""
    message = AcceptedMessage.objects.create(
        id=uuid.uuid4(), thread=thread, box_id=thread.box_id, author=thread.owner, text=text
    )
    return message.id


@sync_to_async
def transcript(thread: Thread) -> list[Step]:
    return list(Step.objects.filter(thread=thread).order_by("seq"))


def accepted_ids_in(steps: list[Step]) -> list[str]:
    return [i for s in steps if s.type == "user_message" for i in s.metadata.get("acceptedIds", [])]
