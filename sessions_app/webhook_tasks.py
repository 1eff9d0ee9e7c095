"""Durable webhook deliveries: every attempt is a task in the database.

An integration response is delivered by ``enqueue``: the first attempt is a task of this
deployment's webhook queue (``queue``) (``django-tasks`` with its database backend, ``django_tasks_db``), run by
the task workers of any server process (``sessions_app.task_worker``). An attempt that fails
with a connection error, a timeout or a 5xx enqueues the next one, to run after the next of
``WEBHOOK_RETRY_DELAYS`` (the schedule travels with the delivery); a delivery therefore survives a restart of every process (its next
attempt waits in the database) and is retried on its schedule. It ends delivered (the last
task succeeded), refused (a 4xx or a forbidden destination: the task fails, not retried) or
dead-lettered (the last attempt failed: the task fails with every attempt's problem). The
admin's "DB task results" page lists each attempt: its delivery id, number, status and error.

An attempt whose process dies while it runs is run again by another process
(``requeue_abandoned``): receivers deduplicate on the delivery id, as for any retry.
"""

import asyncio
import logging
import uuid
from datetime import timedelta
from typing import Any

from django.utils import timezone
from django_tasks import TaskResultStatus, task
from django_tasks_db.models import DBTaskResult

from chatproject import tracing
from sessions_app import metrics, webhooks
from sessions_app.processes import layer_fingerprint
from threads_app.models import Box
from threads_app.services import ensure_webhook_secret

logger = logging.getLogger(__name__)


def queue() -> str:
    """This deployment's webhook queue: named by its channel layer, as its claims are
    (``processes.layer_fingerprint``), so that another deployment sharing the database (other
    settings: other allowed hosts, other retry delays) never runs its attempts."""
    return f"webhooks-{layer_fingerprint()[:20]}"


class DeliveryFailed(Exception):
    """The last attempt failed: the delivery is dead-lettered (the failed task says why)."""


class DeliveryRefused(Exception):
    """The receiver refused it, or its destination is forbidden: not sent again."""


@task()
def deliver_attempt(
    box_id: str,
    body: str,
    delivery: str,
    number: int,
    problems: list[str],
    delays: list[float],
    trace: dict[str, str] | None = None,
) -> str:
    """Attempt ``number`` of ``delivery``; enqueues the next one if this one failed and its
    schedule (``delays``, fixed when the delivery was made) has one left. ``problems`` are
    the earlier attempts' (for the dead letter). ``trace`` is the span the delivery was made
    for (``enqueue``'s: traces on only), the parent of every attempt's, retries' too: one
    trace holds the turn and each attempt at delivering its response. An attempt without one
    (a delivery made outside any trace) is a trace of its own."""
    attributes = {"tether.delivery": delivery, "tether.attempt": number}
    with tracing.received(trace or {}, "webhook attempt", attributes, kind="consumer") as span:
        result = _attempt(box_id, body, delivery, number, problems, delays, trace)
        if span is not None:
            span.set_attribute("tether.outcome", result)
        return result


def _attempt(
    box_id: str,
    body: str,
    delivery: str,
    number: int,
    problems: list[str],
    delays: list[float],
    trace: dict[str, str] | None,
) -> str:
    if _next_attempt_queued(delivery, number):
        # Run again after its process died between enqueuing the next attempt and recording
        # its own end: the next attempt carries the delivery on.
        return f"not sent again: attempt {number + 1} is queued"
    box = Box.objects.filter(pk=box_id).first()
    if box is None or not box.webhook_url:
        return "not sent: the box or its webhook URL is gone"
    if not box.webhook_secret:  # made here, so that the attempt itself touches no database
        box.webhook_secret = ensure_webhook_secret(box.pk)
    result = asyncio.run(webhooks.attempt(box, body.encode(), delivery, number))
    metrics.webhook_deliveries.labels(result.outcome.value).inc()
    if result.outcome is webhooks.Outcome.DELIVERED:
        return f"delivered (attempt {number})"
    if result.outcome is webhooks.Outcome.REFUSED:
        raise DeliveryRefused(f"delivery {delivery}, attempt {number}: {result.problem}")
    problems = [*problems, f"attempt {number}: {result.problem}"]
    if number > len(delays):
        logger.error("webhook %s failed after %d attempts (%s)", delivery, number, result.problem)
        raise DeliveryFailed(f"delivery {delivery} failed after {number} attempts: " + "; ".join(problems))
    delay = delays[number - 1]
    deliver_attempt.using(queue_name=queue(), run_after=timezone.now() + timedelta(seconds=delay)).enqueue(
        box_id, body, delivery, number + 1, problems, delays, **_carrying(trace)
    )
    logger.info("webhook %s failed (%s); attempt %d in %gs", delivery, result.problem, number + 1, delay)
    return f"failed ({result.problem}); attempt {number + 1} in {delay:g}s"


def _next_attempt_queued(delivery: str, number: int) -> bool:
    return DBTaskResult.objects.filter(
        queue_name=queue(), args_kwargs__args__2=delivery, args_kwargs__args__3=number + 1
    ).exists()


def enqueue(box: Box, payload: dict[str, Any], *, trace: dict[str, str] | None = None) -> str:
    """Deliver ``payload`` to the box's webhook, durably; returns the delivery id. ``trace``
    (a ``tracing.carrier``: the turn that made the response) is the parent of every attempt's
    span; without one, the current span is."""
    delivery = uuid.uuid4().hex
    body = webhooks.encode(payload).decode()
    deliver_attempt.using(queue_name=queue()).enqueue(
        str(box.pk), body, delivery, 1, [], webhooks.retry_delays(), **_carrying(trace or tracing.carrier())
    )
    return delivery


def _carrying(trace: dict[str, str] | None) -> dict[str, Any]:
    """The keyword that carries ``trace`` to an attempt: none without a trace (traces off),
    so that the stored task is what it always was."""
    return {"trace": trace} if trace else {}


def requeue_abandoned(live_workers: set[str]) -> int:
    """Run again the attempts whose worker (a process's address) is no longer alive; how many."""
    abandoned = [
        result.pk
        for result in DBTaskResult.objects.running().filter(queue_name=queue()).only("pk", "worker_ids")
        if not result.worker_ids or result.worker_ids[-1] not in live_workers
    ]
    if abandoned:
        DBTaskResult.objects.filter(pk__in=abandoned).running().update(
            status=TaskResultStatus.READY, started_at=None
        )
        logger.warning("%d webhook attempt(s) of processes that died are run again", len(abandoned))
    return len(abandoned)
