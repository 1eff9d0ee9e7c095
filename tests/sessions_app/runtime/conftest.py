"""Fixtures for the runtime tests: a real thread to write the transcript to, the echo engine."""

import uuid

import pytest
from asgiref.sync import sync_to_async

from sessions_app.runtime.engines.base import UserTurn
from sessions_app.runtime.engines.echo import EchoEngine
from threads_app.models import Step, Thread
from threads_app.services import accept_message, default_box_for


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
def accepted_turn(thread: Thread, text: str) -> UserTurn:
    """The turn of a send accepted as the send path accepts it (the runtime's input)."""
    send, _ = accept_message(message_id=uuid.uuid4(), thread=thread, author=thread.owner, text=text)
    return UserTurn.of_send(send)


@sync_to_async
def transcript(thread: Thread) -> list[Step]:
    return list(Step.objects.filter(thread=thread).order_by("seq"))


def accepted_ids_in(steps: list[Step]) -> list[str]:
    return [i for s in steps if s.type == "user_message" for i in s.metadata.get("acceptedIds", [])]
