"""A socket that resumes a thread is on the thread's bus before the history is read: what
another tab or process publishes after the read reaches it live, and the read carries
everything before. Joined after the read (as it was until 2026-12-03), the socket missed
what was published in between: a watcher on a second process did not get the next
``chat-user-message`` of a tab on the first (the traces cluster test, under load)."""

import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from sessions_app.thread_bus import thread_group
from tests.support.client import session_cookie
from tests.support.wire import in_process_socket, new_auth
from threads_app.models import Thread

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(params=["tests.apps.lifecycle_app", "sessions_app.default_app"])
def app(request: Any, settings: Any, tmp_path: Any) -> str:
    """Each kind of app, on the in-memory channel layer, in this process."""
    settings.CHAT_APP = request.param
    settings.ECHO_STATE_DIR = str(tmp_path / "echo")
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    return str(request.param)


@sync_to_async
def thread_of(user: Any) -> Thread:
    from threads_app.services import default_box_for, upsert_step

    thread = Thread.objects.create(owner=user, box=default_box_for(user), name="resumed")
    upsert_step(thread.id, uuid.uuid4(), type="user_message", name="user", output="hi")
    return thread


async def test_a_resumed_socket_is_on_the_threads_bus_when_the_history_arrives(app, make_user):
    user = make_user()
    thread = await thread_of(user)
    group = thread_group(thread.id)
    layer: Any = get_channel_layer()
    async with in_process_socket(await session_cookie(user)) as sock:
        await sock.connect_namespace(new_auth(threadId=str(thread.id)))
        await sock.send_event("connection_successful")
        [resumed] = await sock.event("resume_thread")
        members = dict(layer.groups.get(group, {}))
        assert resumed["id"] == str(thread.id)
        assert len(members) == 1, (app, group, layer.groups)


async def test_another_users_thread_is_refused_before_any_bus_is_joined(app, make_user):
    owner, stranger = make_user(), make_user()
    thread = await thread_of(owner)
    layer: Any = get_channel_layer()
    async with in_process_socket(await session_cookie(stranger)) as sock:
        refused = await sock.refused_connect(new_auth(threadId=str(thread.id)))
        assert refused == {"message": "authorization failed"}, refused
        assert not layer.groups.get(thread_group(thread.id)), layer.groups
