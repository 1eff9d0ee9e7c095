"""Liveness (``sessions_app.processes``): a process whose beats stopped but whose database
connections are open is stalled and keeps its lease for up to ``PROCESS_STALL_LIMIT``; one
whose connections are gone is dead after ``PROCESS_DEAD_AFTER``; and a process that was
stalled itself judges nobody until it has beaten again."""

import uuid
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from sessions_app.models import ServerProcess
from sessions_app.processes import dead_cutoff, heartbeat, is_alive, vouch_for_stalled

pytestmark = pytest.mark.django_db(transaction=True)

needs_postgres = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="connections are told apart in PostgreSQL's pg_stat_activity"
)


def process(*, beat_ago: float, application: str) -> str:
    """A process row whose last beat (and lease) is ``beat_ago`` seconds old; its address."""
    address = f"p-{uuid.uuid4().hex}"
    beat = timezone.now() - timedelta(seconds=beat_ago)
    ServerProcess.objects.create(
        address=address, pid=1, heartbeat_at=beat, beat_at=beat, db_application=application
    )
    return address


@needs_postgres
def test_a_process_with_open_connections_is_stalled_not_dead():
    connection.ensure_connection()  # this test's own connection is named DB_APPLICATION_NAME
    stalled = process(beat_ago=settings.PROCESS_DEAD_AFTER * 0.75, application=settings.DB_APPLICATION_NAME)
    dead = process(beat_ago=settings.PROCESS_DEAD_AFTER * 0.75, application="tether-nobody-1-deadbeef")
    too_long = process(beat_ago=settings.PROCESS_STALL_LIMIT + 1, application=settings.DB_APPLICATION_NAME)

    assert vouch_for_stalled("me", timezone.now()) >= 1  # other tests' servers may be stalled too
    renewed = ServerProcess.objects.get(address=stalled)
    assert renewed.heartbeat_at > timezone.now() - timedelta(seconds=1)
    assert (
        renewed.beat_at is not None and renewed.beat_at < renewed.heartbeat_at
    )  # its own beat still says how long it stalled
    assert ServerProcess.objects.get(address=dead).heartbeat_at < timezone.now() - timedelta(seconds=1)
    assert not is_alive(too_long)


@needs_postgres
def test_a_fresh_lease_is_not_renewed_by_others():
    fresh = process(beat_ago=0, application=settings.DB_APPLICATION_NAME)
    before = ServerProcess.objects.get(address=fresh).heartbeat_at
    vouch_for_stalled("me", timezone.now())
    assert ServerProcess.objects.get(address=fresh).heartbeat_at == before


def test_a_process_that_stalled_itself_judges_by_its_last_beat():
    lapsed = process(beat_ago=settings.PROCESS_DEAD_AFTER + 3, application="")
    assert not is_alive(lapsed)
    heartbeat.last_beat = timezone.now() - timedelta(seconds=10)  # this process woke from a 10 s stall
    try:
        assert dead_cutoff() < timezone.now() - timedelta(seconds=10)
        assert is_alive(lapsed), "a process that was stalled itself took another's lease for lapsed"
    finally:
        heartbeat.last_beat = None
    assert not is_alive(lapsed)
