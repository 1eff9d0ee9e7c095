"""State changes of the durable records: creating threads, writing transcript steps.

Every function here is synchronous and transactional; async callers wrap them with
``database_sync_to_async``.
"""

import uuid
from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone

from threads_app.models import AcceptedMessage, Box, Step, Thread

THREAD_NAME_MAX = 255


def default_box_for(user: User) -> Box:
    """The user's workspace, created on first use."""
    box, _ = Box.objects.get_or_create(owner=user, name="default")
    return box


class ThreadNotOwned(Exception):
    """The thread id belongs to another user (or to a deleted thread)."""


def ensure_thread(user: User, thread_id: uuid.UUID, *, name: str = "") -> tuple[Thread, bool]:
    """Create the thread on the first interaction, named after the first message.

    Returns ``(thread, created)``. Concurrent callers with the same id get one row: the
    loser of the insert race reads the winner's row.
    """
    existing = Thread.objects.filter(pk=thread_id).first()
    if existing is None:
        box = default_box_for(user)
        try:
            with transaction.atomic():
                thread = Thread.objects.create(id=thread_id, owner=user, box=box, name=name[:THREAD_NAME_MAX])
            return thread, True
        except IntegrityError:
            existing = Thread.objects.get(pk=thread_id)
    if existing.owner_id != user.pk or existing.deleted_at is not None:
        raise ThreadNotOwned(str(thread_id))
    return existing, False


def upsert_step(thread_id: uuid.UUID, step_id: uuid.UUID, **fields: Any) -> Step:
    """Write a transcript step; the same id twice updates the row and keeps its ``seq``.

    The thread row is locked while a new ``seq`` is handed out, so concurrent writers of one
    thread never collide on ``(thread, seq)`` and ids never produce a second row.
    """
    if fields.get("created_at") is None:
        fields["created_at"] = timezone.now()
    with transaction.atomic():
        last_seq = (
            Thread.objects.select_for_update().filter(pk=thread_id).values_list("last_seq", flat=True).get()
        )
        step = Step.objects.filter(pk=step_id, thread_id=thread_id).first()
        if step is not None:
            fields.pop("created_at", None)
            for key, value in fields.items():
                setattr(step, key, value)
            step.save(update_fields=list(fields))
            return step
        seq = last_seq + 1
        Thread.objects.filter(pk=thread_id).update(last_seq=seq, updated_at=timezone.now())
        return Step.objects.create(id=step_id, thread_id=thread_id, seq=seq, **fields)


def delete_step(thread_id: uuid.UUID, step_id: uuid.UUID) -> None:
    Step.objects.filter(pk=step_id, thread_id=thread_id).delete()


def save_thread_session(
    thread_id: uuid.UUID,
    *,
    metadata: dict[str, Any],
    chat_profile: str,
    chat_settings: dict[str, Any],
) -> None:
    """Persist a chat's user session into its thread (merged over what is stored)."""
    with transaction.atomic():
        thread = Thread.objects.select_for_update().filter(pk=thread_id).first()
        if thread is None:
            return
        thread.metadata = {**thread.metadata, **metadata}
        thread.chat_profile = chat_profile or ""
        thread.chat_settings = chat_settings
        thread.save(update_fields=["metadata", "chat_profile", "chat_settings", "updated_at"])


class MessageConflict(Exception):
    """A message id was reused with different content."""


def accept_message(
    *,
    message_id: uuid.UUID,
    thread: Thread,
    author: User,
    text: str,
    images: list[dict[str, Any]] | None = None,
    source: str = AcceptedMessage.Source.CHAT,
    session_id: uuid.UUID | None = None,
    holder: str = "",
) -> tuple[AcceptedMessage, bool]:
    """Record a user send; the message id is the idempotency key.

    Returns ``(record, created)``. The same id with the same content returns the existing
    record; with different content (or another thread or author) it raises MessageConflict.
    """
    images = images or []
    try:
        with transaction.atomic():
            return (
                AcceptedMessage.objects.create(
                    id=message_id,
                    thread=thread,
                    box_id=thread.box_id,
                    author=author,
                    text=text,
                    images=images,
                    source=source,
                    session_id=session_id,
                    holder=holder,
                ),
                True,
            )
    except IntegrityError:
        existing = AcceptedMessage.objects.get(pk=message_id)
    same = (
        existing.thread_id == thread.pk
        and existing.author_id == author.pk
        and existing.text == text
        and existing.images == images
        and existing.source == source
    )
    if not same:
        raise MessageConflict(str(message_id)) from None
    return existing, False


def revive_failed(message_id: uuid.UUID, *, holder: str = "") -> bool:
    """ "Send again" of a send that failed before it was transcribed (a stop dropped it, say):
    it becomes pending again, exactly once however many retries race."""
    return (
        AcceptedMessage.objects.filter(
            pk=message_id, state=AcceptedMessage.State.FAILED, step__isnull=True
        ).update(state=AcceptedMessage.State.PENDING, failure="", queued=None, holder=holder)
        == 1
    )


def take_over_send(message_id: uuid.UUID, *, previous_holder: str, holder: str) -> bool:
    """Become the holder of a send whose holder died (or that nobody held); True for the one
    caller that won."""
    return AcceptedMessage.objects.filter(pk=message_id, holder=previous_holder).update(holder=holder) == 1


def record_queued(message_id: uuid.UUID, queued: bool) -> None:
    """Keep the first answer's ``queued`` so that repeats of the message id get the same one."""
    AcceptedMessage.objects.filter(pk=message_id, queued__isnull=True).update(queued=queued)


def settled_queued(message_id: uuid.UUID) -> bool | None:
    return AcceptedMessage.objects.filter(pk=message_id).values_list("queued", flat=True).first()


def rename_thread(thread: Thread, name: str) -> Thread:
    """Give the thread a new name (already validated: at most ``THREAD_NAME_MAX`` characters)."""
    thread.name = name
    thread.save(update_fields=["name", "updated_at"])
    return thread


def soft_delete_thread(thread: Thread) -> None:
    """Mark the thread deleted; it vanishes from every read. Its rows are kept."""
    Thread.objects.filter(pk=thread.pk, deleted_at__isnull=True).update(deleted_at=timezone.now())
