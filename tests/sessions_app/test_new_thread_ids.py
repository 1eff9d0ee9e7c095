"""The thread a send without a threadId opens (``POST /api/chat/send``): the same for a repeat
of the send, and not computable by another user (who could otherwise create it first)."""

import uuid

import pytest
from django.contrib.auth import get_user_model

from sessions_app.views import new_thread_id

pytestmark = pytest.mark.django_db


def test_a_repeat_gets_the_same_thread_and_another_user_another_one(settings):
    alice, bob = (get_user_model().objects.create(username=name) for name in ("alice", "bob"))
    message_id = uuid.uuid4()
    assert new_thread_id(alice, message_id) == new_thread_id(alice, message_id)
    assert new_thread_id(alice, message_id) != new_thread_id(bob, message_id)
    assert new_thread_id(alice, message_id) != new_thread_id(alice, uuid.uuid4())
    # Keyed by the server's secret: knowing the user and the message id is not enough.
    before = new_thread_id(alice, message_id)
    settings.SECRET_KEY = "another install's secret key, long enough to be a real one"
    assert new_thread_id(alice, message_id) != before
