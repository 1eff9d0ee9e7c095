"""Read-only queries over threads and their transcripts, always scoped to an owner."""

import uuid
from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from threads_app.models import Box, Step, Thread
from threads_app.wire import STEP_FIELDS, step_row_to_dict, thread_to_dict


def thread_owner_id(thread_id: uuid.UUID) -> int | None:
    """The owner's pk of a thread (deleted ones included), or None when it does not exist."""
    return Thread.objects.filter(pk=thread_id).values_list("owner_id", flat=True).first()


def get_owned_thread(user: AbstractBaseUser, thread_id: uuid.UUID) -> Thread | None:
    """The live (not deleted) thread if ``user`` owns it; None for missing or foreign ids."""
    return (
        Thread.objects.select_related("owner")
        .filter(pk=thread_id, owner=user, deleted_at__isnull=True)
        .first()
    )


def step_dicts(thread_id: uuid.UUID, *, messages_only: bool = False) -> list[dict[str, Any]]:
    """The transcript of a thread as StepDicts in ``seq`` order."""
    steps = Step.objects.filter(thread_id=thread_id)
    if messages_only:
        steps = steps.filter(type__contains="message")
    return [step_row_to_dict(row) for row in steps.order_by("seq").values(*STEP_FIELDS)]


def owned_thread_dict(user: AbstractBaseUser, thread_id: uuid.UUID) -> dict[str, Any] | None:
    """The ThreadDict with its whole transcript, or None when the user may not read it."""
    thread = get_owned_thread(user, thread_id)
    if thread is None:
        return None
    return thread_to_dict(thread, step_dicts(thread.pk))


def default_box_for(user: AbstractBaseUser) -> Box:
    """The user's workspace, created on first use."""
    box, _ = Box.objects.get_or_create(owner=user, name="default")
    return box
