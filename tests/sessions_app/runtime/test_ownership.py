"""Who runs a thread's interactive session: the lease on ``Thread.runtime_owner``."""

import uuid
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from sessions_app.models import ServerProcess
from sessions_app.processes import layer_fingerprint
from sessions_app.runtime.ownership import claim_thread
from threads_app.models import Box, Thread

pytestmark = pytest.mark.django_db


def a_thread(owner: str = "") -> uuid.UUID:
    user = get_user_model().objects.create(username=f"u-{uuid.uuid4().hex[:8]}")
    box = Box.objects.create(owner=user, name="default")
    return Thread.objects.create(owner=user, box=box, name="t", runtime_owner=owner).pk


def process(address: str, *, alive: bool) -> None:
    beat = timezone.now() - (timedelta(0) if alive else timedelta(minutes=5))
    ServerProcess.objects.create(address=address, pid=1, heartbeat_at=beat, layer=layer_fingerprint())


def owner_of(thread_id: uuid.UUID) -> str:
    return Thread.objects.get(pk=thread_id).runtime_owner


def test_a_free_thread_is_taken():
    process("me", alive=True)
    thread_id = a_thread()
    assert claim_thread(thread_id, "me") == "me"
    assert owner_of(thread_id) == "me"


def test_a_thread_of_a_live_process_stays_with_it_and_costs_one_read():
    process("me", alive=True)
    process("other", alive=True)
    thread_id = a_thread("other")
    with CaptureQueriesContext(connection) as queries:
        assert claim_thread(thread_id, "me") == "other"
    assert len(queries) == 1 and queries[0]["sql"].lstrip().upper().startswith("SELECT")
    assert owner_of(thread_id) == "other"


def test_a_thread_of_a_dead_process_is_taken_over():
    process("me", alive=True)
    process("dead", alive=False)
    thread_id = a_thread("dead")
    assert claim_thread(thread_id, "me") == "me"
    assert owner_of(thread_id) == "me"


def test_a_thread_already_held_is_only_read():
    process("me", alive=True)
    thread_id = a_thread("me")
    with CaptureQueriesContext(connection) as queries:
        assert claim_thread(thread_id, "me") == "me"
    assert len(queries) == 1 and queries[0]["sql"].lstrip().upper().startswith("SELECT")


def test_an_unknown_thread_has_no_owner():
    assert claim_thread(uuid.uuid4(), "me") == ""
