"""Which threads' open sends the recovery loop takes over: its own, those of dead processes on
the same channel layer (a process on another one, another deployment sharing the database or
a test's private Redis, cannot be reached by the sessions it served), and those of threads no
process claimed (the accepting process died before handing the send over)."""

import uuid
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from sessions_app.models import ServerProcess
from sessions_app.processes import layer_fingerprint
from sessions_app.recovery import orphaned_chat_threads
from threads_app.models import AcceptedMessage, Box, Thread

pytestmark = pytest.mark.django_db


def open_send_in_thread_run_by(owner: str) -> uuid.UUID:
    user = get_user_model().objects.create(username=f"u-{uuid.uuid4().hex[:8]}")
    box = Box.objects.create(owner=user, name="default")
    thread = Thread.objects.create(owner=user, box=box, name="t", runtime_owner=owner)
    sent = AcceptedMessage.objects.create(
        id=uuid.uuid4(), client_id=uuid.uuid4(), thread=thread, box=box, author=user, text="hi"
    )
    AcceptedMessage.objects.filter(pk=sent.pk).update(accepted_at=timezone.now() - timedelta(minutes=1))
    return thread.id


def dead_process(address: str, layer: str) -> None:
    ServerProcess.objects.create(
        address=address, pid=1, heartbeat_at=timezone.now() - timedelta(minutes=5), layer=layer
    )


def test_only_dead_processes_of_this_channel_layer_are_taken_over():
    dead_process("dead-here", layer_fingerprint())
    dead_process("dead-elsewhere", "another-layer")
    here = open_send_in_thread_run_by("dead-here")
    gone = open_send_in_thread_run_by("shut-down-cleanly")  # its row was deleted on the way out
    mine = open_send_in_thread_run_by("me")
    elsewhere = open_send_in_thread_run_by("dead-elsewhere")
    live = open_send_in_thread_run_by("alive-elsewhere")
    ServerProcess.objects.create(
        address="alive-elsewhere", pid=2, heartbeat_at=timezone.now(), layer=layer_fingerprint()
    )
    # Never claimed: the process that accepted it died before handing it over.
    never_run = open_send_in_thread_run_by("")

    threads = {thread for _box, thread, _author in orphaned_chat_threads("me")}
    assert {here, gone, mine, never_run} <= threads
    assert not {elsewhere, live} & threads


def test_a_send_being_handed_over_right_now_is_left_alone():
    thread_id = open_send_in_thread_run_by("")
    AcceptedMessage.objects.filter(thread_id=thread_id).update(accepted_at=timezone.now())
    assert thread_id not in {thread for _box, thread, _author in orphaned_chat_threads("me")}
