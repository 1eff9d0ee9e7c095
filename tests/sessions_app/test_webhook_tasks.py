"""Durable webhook deliveries (``sessions_app.webhook_tasks``): each attempt a task in the
database; a failed one enqueues the next on the retry schedule; the last failure is a dead
letter with every attempt's problem; a refusal is not retried; an attempt whose process died is
run again. The tasks run here as a worker runs them (``deliver_attempt.call``), against a real
receiver on loopback."""

import json
import uuid
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone
from django_tasks import TaskResultStatus
from django_tasks_db.management.commands.db_worker import Worker
from django_tasks_db.models import DBTaskResult

from sessions_app import webhook_tasks
from tests.support.loopback import serving
from tests.support.server import free_port
from tests.support.webhook_receiver import Receiver, hooked_box
from threads_app.models import Box

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
async def receiver():
    hook = Receiver()
    async with serving(hook.handle) as port:
        hook.url = f"http://127.0.0.1:{port}/hook"
        yield hook


@pytest.fixture(autouse=True)
def loopback_allowed(settings, own_webhook_queue):
    settings.WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    settings.WEBHOOK_RETRY_DELAYS = [5, 10]


@sync_to_async
def queued() -> list[DBTaskResult[Any, Any]]:
    return list(DBTaskResult.objects.filter(queue_name=webhook_tasks.queue()).order_by("enqueued_at"))


@sync_to_async
def run(result: DBTaskResult[Any, Any]) -> str:
    """Run a queued attempt as the worker would (its arguments as stored)."""
    args = result.args_kwargs["args"]
    return webhook_tasks.deliver_attempt.call(*args)


async def test_a_delivery_is_one_task_and_a_2xx_ends_it(make_user, receiver):
    box = await hooked_box(make_user(), receiver.url)
    delivery = await sync_to_async(webhook_tasks.enqueue)(box, {"hello": "durable"})
    (first,) = await queued()
    assert first.status == TaskResultStatus.READY and first.args_kwargs["args"][2:] == [
        delivery,
        1,
        [],
        [5, 10],
    ]
    assert await run(first) == "delivered (attempt 1)"
    (_, headers, raw), *_ = receiver.deliveries
    assert headers["X-Tether-Delivery"] == delivery and json.loads(raw) == {"hello": "durable"}
    assert len(await queued()) == 1  # nothing more to do


async def test_a_failed_attempt_enqueues_the_next_on_schedule_and_the_last_is_a_dead_letter(
    make_user, receiver
):
    receiver.statuses = [503, 502, 500]
    box = await hooked_box(make_user(), receiver.url)
    delivery = await sync_to_async(webhook_tasks.enqueue)(box, {"hello": "retry"})
    (first,) = await queued()
    assert (await run(first)).startswith("failed (HTTP 503); attempt 2 in 5s")
    _, second = await queued()
    assert second.args_kwargs["args"][2:] == [delivery, 2, ["attempt 1: HTTP 503"], [5, 10]]
    assert timedelta(seconds=4) < second.run_after - timezone.now() <= timedelta(seconds=5)
    assert (await run(second)).startswith("failed (HTTP 502); attempt 3 in 10s")
    *_, third = await queued()
    with pytest.raises(
        webhook_tasks.DeliveryFailed,
        match="after 3 attempts: attempt 1: HTTP 503; attempt 2: HTTP 502; attempt 3: HTTP 500",
    ):
        await run(third)
    assert [h["X-Tether-Delivery"] for _, h, _ in receiver.deliveries] == [delivery] * 3
    assert len(await queued()) == 3  # no fourth attempt


async def test_a_refusal_is_not_retried(make_user, receiver):
    receiver.statuses = [404]
    box = await hooked_box(make_user(), receiver.url)
    await sync_to_async(webhook_tasks.enqueue)(box, {"hello": "refused"})
    (first,) = await queued()
    with pytest.raises(webhook_tasks.DeliveryRefused, match="HTTP 404"):
        await run(first)
    assert len(await queued()) == 1


async def test_nobody_listening_is_retried_like_a_5xx(make_user):
    box = await hooked_box(make_user(), f"http://127.0.0.1:{free_port()}/nobody")
    await sync_to_async(webhook_tasks.enqueue)(box, {"hello": "nobody"})
    (first,) = await queued()
    assert "attempt 2 in 5s" in await run(first)


@sync_to_async
def _running_under(worker: str) -> uuid.UUID:
    result = DBTaskResult.objects.filter(queue_name=webhook_tasks.queue()).latest("enqueued_at")
    result.claim(worker)
    pk: uuid.UUID = result.pk
    return pk


async def test_an_attempt_whose_process_died_runs_again(make_user, receiver):
    box = await hooked_box(make_user(), receiver.url)
    await sync_to_async(webhook_tasks.enqueue)(box, {"hello": "again"})
    dead = await _running_under("specific.dead!process")
    alive = await _running_under_new(box, "specific.alive!process")
    assert await sync_to_async(webhook_tasks.requeue_abandoned)({"specific.alive!process"}) == 1
    statuses = {r.pk: r.status for r in await queued()}
    assert statuses == {dead: TaskResultStatus.READY, alive: TaskResultStatus.RUNNING}


async def _running_under_new(box: Box, worker: str) -> uuid.UUID:
    await sync_to_async(webhook_tasks.enqueue)(box, {"hello": "still running"})
    return await _running_under(worker)


def run_queue() -> None:
    """What a worker of a server process does (``sessions_app.task_worker``), until the queue
    has nothing ready."""
    Worker(
        queue_names=["*"],
        interval=0,
        batch=True,
        backend_name="default",
        startup_delay=False,
        max_tasks=None,
        worker_id="test-worker",
        excluded_queue_names=[],
    ).run()


async def test_a_dead_letter_is_listed_in_the_admin_with_its_attempts(
    make_user, receiver, admin_client, settings
):
    settings.WEBHOOK_RETRY_DELAYS = [0, 0]
    receiver.statuses = [500, 500, 500]
    box = await hooked_box(make_user(), receiver.url)
    delivery = await sync_to_async(webhook_tasks.enqueue)(box, {"hello": "dead letter"})
    await sync_to_async(run_queue)()

    results = await queued()
    assert [r.status for r in results] == [TaskResultStatus.SUCCESSFUL] * 2 + [TaskResultStatus.FAILED]
    assert len(receiver.deliveries) == 3
    dead = results[-1]
    page = await sync_to_async(admin_client.get)(
        f"/admin/django_tasks_database/dbtaskresult/{dead.pk}/change/"
    )
    text = page.content.decode()
    assert page.status_code == 200, text[:500]
    for shown in (
        "DeliveryFailed",
        delivery,
        "attempt 1: HTTP 500; attempt 2: HTTP 500; attempt 3: HTTP 500",
    ):
        assert shown in text, shown
    listing = await sync_to_async(admin_client.get)(
        "/admin/django_tasks_database/dbtaskresult/?status__exact=FAILED"
    )
    assert str(dead.pk) in listing.content.decode()


async def test_an_attempt_run_again_after_its_next_was_queued_sends_nothing(make_user, receiver):
    receiver.statuses = [503]
    box = await hooked_box(make_user(), receiver.url)
    await sync_to_async(webhook_tasks.enqueue)(box, {"hello": "once"})
    (first,) = await queued()
    await run(first)  # failed, attempt 2 queued; then its process "died" before recording that
    assert (await run(first)) == "not sent again: attempt 2 is queued"
    assert len(receiver.deliveries) == 1
