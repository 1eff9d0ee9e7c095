"""What the Chainlit-API tests share: a browser-like client of a user, and threads to list."""

import uuid

from django.conf import settings
from django.test import Client

from threads_app.models import Step, Thread
from threads_app.services import ensure_thread, upsert_step

P = settings.CHAINLIT_PATH_PREFIX
OURS = "http://testserver"


def browser_of(user) -> Client:
    """A signed-in client sending what a browser's fetch sends: its Origin (ours), the
    session cookie, and no CSRF token (Chainlit's frontend has none)."""
    client = Client(HTTP_ORIGIN=OURS, enforce_csrf_checks=True)
    client.force_login(user)
    return client


def thread_with_reply(owner, name: str = "chat", text: str = "an answer") -> tuple[Thread, Step, Step]:
    """A thread of ``owner`` with a user message and the assistant's reply to it."""
    thread, _ = ensure_thread(owner, uuid.uuid4(), name=name)
    asked = upsert_step(thread.pk, uuid.uuid4(), type="user_message", name="user", output="a question")
    answer = upsert_step(thread.pk, uuid.uuid4(), type="assistant_message", name="assistant", output=text)
    return thread, asked, answer
