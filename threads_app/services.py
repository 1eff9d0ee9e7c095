"""State changes of the durable records: creating threads, writing transcript steps.

Every function here is synchronous and transactional; async callers wrap them with
``database_sync_to_async``.
"""

import uuid
from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, connection, transaction
from django.db.models import BooleanField, Case, ExpressionWrapper, F, Q, When
from django.utils import timezone

from threads_app import prepared, step_budgets
from threads_app.fencing import Fence, Fenced, fenced, in_force
from threads_app.models import (
    DEFAULT_BOX_NAME,
    AcceptedMessage,
    Box,
    Step,
    StepType,
    Thread,
    new_webhook_secret,
)
from threads_app.send_inserts import insert_send
from threads_app.signals import thread_deleted
from threads_app.step_appends import append_step
from threads_app.titles import thread_title
from threads_app.wire import step_to_dict

THREAD_NAME_MAX = 255


def default_box_for(user: User) -> Box:
    """The user's workspace, created on first use."""
    box, _ = Box.objects.get_or_create(owner=user, name=DEFAULT_BOX_NAME)
    return box


class ThreadNotOwned(Exception):
    """The thread id belongs to another user (or to a deleted thread)."""


def ensure_thread(
    user: User, thread_id: uuid.UUID, *, name: str = "", chat_profile: str = ""
) -> tuple[Thread, bool]:
    """Create the thread on the first interaction, named after the first message (``name``, its
    text, made a title by ``thread_title``; blank stays blank) and with the chat's profile
    (which it keeps from then on).

    Returns ``(thread, created)``. Concurrent callers with the same id get one row: the
    loser of the insert race reads the winner's row.
    """
    existing = Thread.objects.filter(pk=thread_id).first()
    if existing is None:
        box = default_box_for(user)
        try:
            with transaction.atomic():
                thread = Thread.objects.create(
                    id=thread_id,
                    owner=user,
                    box=box,
                    name=thread_title(name)[:THREAD_NAME_MAX] if name else "",
                    chat_profile=chat_profile,
                )
            return thread, True
        except IntegrityError:
            existing = Thread.objects.get(pk=thread_id)
    if existing.owner_id != user.pk or existing.deleted_at is not None:
        raise ThreadNotOwned(str(thread_id))
    return existing, False


def upsert_step(
    thread_id: uuid.UUID, step_id: uuid.UUID, *, fence: Fence | None = None, **fields: Any
) -> Step:
    """Write a transcript step; the same id twice updates the row and keeps its ``seq``.

    A new step gets the thread's next ``seq`` with the thread row locked, so concurrent
    writers of one thread never collide on ``(thread, seq)`` and ids never produce a second
    row. On PostgreSQL a new step is one statement (``step_appends``). ``fence``: the claim it
    is written under (default: the current task's, ``fencing.current``); ``Fenced`` when stale.
    """
    return _write_step(thread_id, step_id, fields, transcribes=(), fence=fence)


def write_answering_step(
    thread_id: uuid.UUID,
    step_id: uuid.UUID,
    *,
    answers: Sequence[uuid.UUID],
    outcome: str,
    fence: Fence | None = None,
    **fields: Any,
) -> Step:
    """A turn's last step (an engine's reply) with the outcome of the sends it answered, in
    one write: one statement on PostgreSQL (``step_appends``), one transaction elsewhere, so
    the turn ends in one database trip and a send never has an outcome without its reply
    (recovery reads an outcome as "answered"). ``Fenced`` when the claim is stale: neither
    is written."""
    return _write_step(thread_id, step_id, fields, transcribes=(), fence=fence, settles=(answers, outcome))


def _write_step(
    thread_id: uuid.UUID,
    step_id: uuid.UUID,
    fields: dict[str, Any],
    *,
    transcribes: Sequence[uuid.UUID],
    unqueued: Sequence[uuid.UUID] = (),
    fence: Fence | None = None,
    settles: tuple[Sequence[uuid.UUID], str] | None = None,
) -> Step:
    """The write of every step: its text within the step and thread budgets
    (``step_budgets``), the thread's ``text_bytes`` kept in the same transaction; under
    ``fence`` (or the current task's), only while that claim is current; ``settles``: (sends,
    outcome) recorded with it (``write_answering_step``)."""
    fence = in_force(fence)
    if fence is not None:
        fields.update(fence.stamp())
    if fields.get("created_at") is None:
        fields["created_at"] = timezone.now()
    fields = step_budgets.fit_step(fields, room=None)
    budget = settings.THREAD_MAX_BYTES
    seq = append_step(
        thread_id,
        step_id,
        fields,
        transcribes=transcribes,
        unqueued=unqueued,
        text_bytes=step_budgets.step_text_bytes(fields),
        thread_budget=budget,
        fence=fence,
        settles=settles,
    )
    if seq is not None:
        return Step(id=step_id, thread_id=thread_id, seq=seq, **fields)
    with transaction.atomic():
        locked = fenced(Thread.objects.select_for_update().filter(pk=thread_id), fence)
        found = locked.values_list("last_seq", "text_bytes").first()
        if found is None:
            if fence is not None:
                raise Fenced(fence, f"step {step_id}")
            raise Thread.DoesNotExist(thread_id)
        last_seq, used = found
        step = Step.objects.filter(pk=step_id, thread_id=thread_id).first()
        if step is not None:
            fields.pop("created_at", None)
            old = step_budgets.step_text_bytes({"input": step.input, "output": step.output})
            fields = {"input": step.input, "output": step.output, **fields}
            if step_budgets.step_text_bytes(fields) - old > budget - used:
                fields = step_budgets.fit_step(fields, room=max(0, budget - used + old))
            for key, value in fields.items():
                setattr(step, key, value)
            step.save(update_fields=list(fields))
            grown = step_budgets.step_text_bytes(fields) - old
            if grown:
                Thread.objects.filter(pk=thread_id).update(text_bytes=F("text_bytes") + grown)
        else:
            seq = last_seq + 1
            fields = step_budgets.fit_step(fields, room=max(0, budget - used))
            Thread.objects.filter(pk=thread_id).update(
                last_seq=seq,
                text_bytes=F("text_bytes") + step_budgets.step_text_bytes(fields),
                updated_at=timezone.now(),
            )
            step = Step.objects.create(id=step_id, thread_id=thread_id, seq=seq, **fields)
        if transcribes:
            AcceptedMessage.objects.filter(pk__in=transcribes).update(
                state=AcceptedMessage.State.TRANSCRIBED, step=step
            )
        if unqueued:
            AcceptedMessage.objects.filter(pk__in=unqueued, queued__isnull=True).update(queued=False)
        if settles is not None:
            settle_sends(list(settles[0]), settles[1], fence=fence)
        return step


def delete_step(thread_id: uuid.UUID, step_id: uuid.UUID) -> None:
    Step.objects.filter(pk=step_id, thread_id=thread_id).delete()


def delete_steps_after(thread_id: uuid.UUID, seq: int) -> list[dict[str, Any]]:
    """Delete every step of the thread after ``seq`` (an edited message's later conversation,
    whichever session wrote it) and answer their StepDicts, oldest first, so each one's
    removal can be shown."""
    with transaction.atomic():
        later = list(
            Step.objects.select_for_update().filter(thread_id=thread_id, seq__gt=seq).order_by("seq")
        )
        removed = [step_to_dict(step) for step in later]
        Step.objects.filter(pk__in=[step.pk for step in later]).delete()
    return removed


def reopen_edited_send(
    thread_id: uuid.UUID, step_seq: int, send_id: uuid.UUID, text: str, *, fence: Fence | None = None
) -> tuple[list[dict[str, Any]], int]:
    """An engine-runtime edit: the edited message's user step and everything after it leave
    the transcript, and its send is pending again with the new text (the thread's runner
    transcribes and answers it as any send). Answers the removed steps' StepDicts, oldest
    first, and how many user turns the transcript keeps before the message (what an engine
    that counts turns rewinds to). Only while ``fence`` holds (``Fenced`` otherwise)."""
    with transaction.atomic():
        locked = fenced(Thread.objects.select_for_update().filter(pk=thread_id), fence)
        if locked.values_list("pk").first() is None:
            if fence is not None:
                raise Fenced(fence, f"the edit of send {send_id}")
            raise Thread.DoesNotExist(thread_id)
        removed = delete_steps_after(thread_id, step_seq - 1)  # the message's own step too
        AcceptedMessage.objects.filter(pk=send_id).update(
            text=text,
            state=AcceptedMessage.State.PENDING,
            outcome="",
            failure="",
            holder="",
            queued=None,
            step=None,
            accepted_at=timezone.now(),
        )
        turns_kept = Step.objects.filter(
            thread_id=thread_id, type=StepType.USER_MESSAGE, seq__lt=step_seq
        ).count()
    return removed, turns_kept


def save_thread_session(
    thread_id: uuid.UUID,
    *,
    metadata: dict[str, Any],
    chat_profile: str,
    chat_settings: dict[str, Any],
) -> None:
    """Persist a chat's user session into its thread (merged over what is stored). A thread's
    chat profile is set once: a profile already there is kept."""
    with transaction.atomic():
        thread = Thread.objects.select_for_update().filter(pk=thread_id).first()
        if thread is None:
            return
        thread.chat_profile = thread.chat_profile or chat_profile or ""
        thread.metadata = {**thread.metadata, **metadata}
        if "chat_profile" in metadata:
            thread.metadata["chat_profile"] = thread.chat_profile
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
    queued: bool | None = None,
) -> tuple[AcceptedMessage, bool]:
    """Record a user send; the client's message id is the idempotency key within the thread
    (the row's key is ``AcceptedMessage.key(thread, message_id)``).

    Returns ``(record, created)``. The same id with the same content returns the existing
    record; with different content (or another author) it raises MessageConflict. The INSERT
    is written once (``send_inserts``).
    """
    images = images or []
    key = AcceptedMessage.key(thread.pk, message_id)
    record = insert_send(
        id=key,
        client_id=message_id,
        thread=thread,
        box_id=thread.box_id,
        author=author,
        text=text,
        images=images,
        source=source,
        session_id=session_id,
        holder=holder,
        queued=queued,
    )
    if record is not None:
        return record, True
    return repeated_send(key, author=author, text=text, images=images, source=source), False


def repeated_send(
    key: uuid.UUID, *, author: User, text: str, images: list[dict[str, Any]], source: str
) -> AcceptedMessage:
    """The record that holds ``key`` already, for a send that found it taken: the same send
    again (a resend after a lost ack), or MessageConflict (other content, another author)."""
    existing = AcceptedMessage.objects.get(pk=key)
    same = (
        existing.author_id == author.pk
        and existing.text == text
        and existing.images == images
        and existing.source == source
    )
    if not same:
        raise MessageConflict(str(existing.client_id))
    return existing


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
    if Thread.objects.filter(pk=thread.pk, deleted_at__isnull=True).update(deleted_at=timezone.now()):
        thread_deleted.send(sender=Thread, thread_id=thread.pk)


# --- boxes --------------------------------------------------------------------------------------


def forget_engine_sessions(box_id: uuid.UUID, thread_ids: list[uuid.UUID] | None = None) -> int:
    """Forget the engine conversation ids of the box's threads (all, or ``thread_ids``).

    An id belongs to the engine that made it: after the box changes engine, resuming it
    would hand one engine another's conversation (Claude cannot resume an echo id). The
    threads' next runs start fresh conversations; the transcripts stay.
    """
    threads = Thread.objects.filter(box_id=box_id).exclude(engine_session_id="")
    if thread_ids is not None:
        threads = threads.filter(pk__in=thread_ids)
    return threads.update(engine_session_id="")


def rotate_webhook_secret(box: Box) -> str:
    """Give the box a new webhook signing key and return it (deliveries from now on use it)."""
    box.webhook_secret = new_webhook_secret()
    Box.objects.filter(pk=box.pk).update(webhook_secret=box.webhook_secret)
    return box.webhook_secret


# --- accepted sends through their turn -----------------------------------------------------------


def transcribe_user_turn(
    thread_id: uuid.UUID,
    step_id: uuid.UUID,
    *,
    author: str,
    text: str,
    content: list[dict[str, Any]],
    accepted_ids: list[uuid.UUID],
    message_ids: list[uuid.UUID],
    unqueued_ids: Sequence[uuid.UUID] = (),
    fence: Fence | None = None,
) -> Step:
    """The user step of a turn, and the sends it carries (``accepted_ids``, their keys) marked
    transcribed, in one transaction. The step lists the sends by their clients' ids
    (``metadata.acceptedIds``): a client retires its pending copy when it sees its id there.
    ``unqueued_ids``: sends whose first answer said "not queued", recorded here (when not
    recorded yet) so that repeats of their ids get the same answer."""
    fields = {
        "type": "user_message",
        "name": author,
        "output": text,
        "content": content,
        "metadata": {"acceptedIds": [str(i) for i in message_ids]},
        "start": timezone.now(),
    }
    return _write_step(
        thread_id, step_id, fields, transcribes=accepted_ids, unqueued=unqueued_ids, fence=fence
    )


def settle_sends(accepted_ids: list[uuid.UUID], outcome: str, *, fence: Fence | None = None) -> int:
    """Record how the turn that transcribed these sends ended (replied, interrupted, error),
    under ``fence`` when named (``Fenced`` when it is stale; the condition is in the UPDATE);
    how many had no outcome yet and now have this one. Every turn ends here, so the UPDATE is
    plain SQL: no ORM query to build each time."""
    if not accepted_ids:
        return 0
    meta = AcceptedMessage._meta  # noqa: SLF001
    q = connection.ops.quote_name
    pk = meta.pk
    assert pk is not None
    marks = ", ".join(["%s"] * len(accepted_ids))
    sql = (
        f"UPDATE {q(meta.db_table)} SET {q('outcome')} = %s, {q('holder')} = '' "
        f"WHERE {q(pk.column or 'id')} IN ({marks}) AND {q('outcome')} = ''"
    )
    params = [outcome, *(pk.get_db_prep_value(i, connection) for i in accepted_ids)]
    if fence is not None:
        fence_sql, fence_params = fence.sql()
        sql, params = f"{sql} AND {fence_sql}", [*params, *fence_params]
    with prepared.cursor() as cursor:
        cursor.execute(sql, params)
        settled = int(cursor.rowcount)
    if fence is not None and not settled and not fence.holds():  # the read only when nothing moved
        raise Fenced(fence, f"the outcome of sends {accepted_ids}")
    return settled


def fail_sends(accepted_ids: list[uuid.UUID], failure: str, *, fence: Fence | None = None) -> None:
    """Pending sends that will never be transcribed, with the reason the UI shows (only while
    ``fence`` holds, when named: a stale owner's queue is the new owner's to answer)."""
    rows = AcceptedMessage.objects.filter(pk__in=accepted_ids, state=AcceptedMessage.State.PENDING)
    fenced(rows, fence).update(state=AcceptedMessage.State.FAILED, failure=failure, holder="")


def fail_pending_sends_of_session(session_id: uuid.UUID, failure: str) -> None:
    """A hooks-API session ended: its sends that never got a turn cannot be answered."""
    AcceptedMessage.objects.filter(
        source=AcceptedMessage.Source.HOOK, session_id=session_id, state=AcceptedMessage.State.PENDING
    ).update(state=AcceptedMessage.State.FAILED, failure=failure, holder="")


def release_sends_held_by(holder: str) -> int:
    """Pending sends a stopping process holds: free for another process to take."""
    return AcceptedMessage.objects.filter(holder=holder, state=AcceptedMessage.State.PENDING).update(
        holder=""
    )


def finish_tool_step(
    step_id: uuid.UUID, *, output: str, is_error: bool, fence: Fence | None = None
) -> Step | None:
    """A tool call's result: its output within the step budget, counted in its thread's
    ``text_bytes`` (an engine's tool output, not something a user can make cheaply, so the
    thread budget counts it without cutting it); under ``fence`` when named."""
    step = Step.objects.filter(pk=step_id).first()
    if step is None:
        return None
    grown = -step_budgets.text_bytes(step.output)
    step.output, cut = step_budgets.cap_text(output)
    grown += step_budgets.text_bytes(step.output)
    step.is_error = is_error
    step.end = timezone.now()
    changed: dict[str, Any] = {"output": step.output, "is_error": is_error, "end": step.end}
    if cut:
        step.metadata = {**step.metadata, step_budgets.TRUNCATED_KEY: True}
        changed["metadata"] = step.metadata
    if fence is not None:
        changed.update(fence.stamp())
    if not fenced(Step.objects.filter(pk=step_id), fence).update(**changed):
        if fence is not None:
            raise Fenced(fence, f"step {step_id}")
        return None
    if grown:
        Thread.objects.filter(pk=step.thread_id).update(text_bytes=F("text_bytes") + grown)
    return step


def save_engine_session_id(
    thread_id: uuid.UUID, engine_session_id: str, *, fence: Fence | None = None
) -> None:
    rows = fenced(Thread.objects.filter(pk=thread_id), fence)
    if not rows.update(engine_session_id=engine_session_id) and fence is not None:
        raise Fenced(fence, f"thread {thread_id}'s engine session id")


# --- boxes, threads and the processes that run them ----------------------------------------------


def claim_box(box_id: uuid.UUID, me: str, *, claimable: Q) -> str:
    """Take the box where ``claimable`` (the live layer's lease rule on ``runtime_owner``)
    allows it; return its owner either way. A claim that changes hands bumps the box's
    fencing token (``runtime_epoch``); ``me`` renewing its own keeps it."""
    Box.objects.filter(claimable, pk=box_id).update(
        runtime_owner=me,
        runtime_heartbeat=timezone.now(),
        runtime_epoch=Case(When(runtime_owner=me, then=F("runtime_epoch")), default=F("runtime_epoch") + 1),
    )
    return Box.objects.filter(pk=box_id).values_list("runtime_owner", flat=True).get()


def claim_thread(thread_id: uuid.UUID, me: str, *, claimable: Q) -> str:
    """Take the thread's interactive runtime where ``claimable`` allows it (the lease rule on
    ``Thread.runtime_owner``: free or held by a dead process); return its owner either way
    ("" for no such thread). A thread held by ``me`` or by another live process is only read,
    in one statement: owners are asked for every few seconds, and a write would queue behind
    the step writes that lock the thread's row. A claim bumps the thread's fencing token
    (``runtime_epoch``)."""
    row = (
        Thread.objects.filter(pk=thread_id)
        .annotate(free=ExpressionWrapper(claimable, output_field=BooleanField()))
        .values_list("runtime_owner", "free")
        .first()
    )
    if row is None:
        return ""
    owner, free = row
    if owner == me or not free:
        return str(owner)
    if Thread.objects.filter(claimable, pk=thread_id).update(
        runtime_owner=me, runtime_epoch=F("runtime_epoch") + 1
    ):
        return me
    return Thread.objects.filter(pk=thread_id).values_list("runtime_owner", flat=True).first() or ""


def release_threads(me: str) -> int:
    """Give up the threads ``me`` runs that have no open chat send; a thread with open sends
    keeps the address, so that once ``me`` is gone they are recovered elsewhere."""
    open_sends = AcceptedMessage.objects.filter(
        Q(state=AcceptedMessage.State.PENDING) | Q(state=AcceptedMessage.State.TRANSCRIBED, outcome=""),
        source=AcceptedMessage.Source.CHAT,
    ).values("thread_id")
    return Thread.objects.filter(runtime_owner=me).exclude(pk__in=open_sends).update(runtime_owner="")


def release_boxes(me: str) -> int:
    """Give up the boxes ``me`` runs integration sessions for (a graceful shutdown, once its
    integration turns ended)."""
    return Box.objects.filter(runtime_owner=me).update(runtime_owner="", runtime_heartbeat=None)


def ensure_webhook_secret(box_id: uuid.UUID) -> str:
    """The box's webhook signing key, generated once (also under concurrency) when empty."""
    Box.objects.filter(pk=box_id, webhook_secret="").update(webhook_secret=new_webhook_secret())
    return Box.objects.filter(pk=box_id).values_list("webhook_secret", flat=True).get()
