"""Read-only queries over threads and their transcripts, always scoped to an owner."""

import uuid
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from threads_app import content_filters
from threads_app.models import AcceptedMessage, Box, Step, Thread
from threads_app.wire import STEP_FIELDS, iso, step_row_to_dict, thread_to_dict


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


# --- transcript rows ----------------------------------------------------------------------
# Every transcript read selects its rows through ``_step_values`` and turns them into
# StepDicts with ``_step_dict``: with a content filter registered (``content_filters``; media_app
# registers one), ``content`` is fetched as the filter's expression (photos already stripped
# by the database) and shown as the filter says, never parsed whole here.


def _step_values(steps: QuerySet[Step]) -> QuerySet[Step, dict[str, Any]]:
    content_filter = content_filters.active()
    if content_filter is None:
        return steps.values(*STEP_FIELDS)
    fields = [field for field in STEP_FIELDS if field != "content"]
    return steps.values(*fields, content_text=content_filter.column("content"))


def _step_dict(row: dict[str, Any]) -> dict[str, Any]:
    content_filter = content_filters.active()
    if "content_text" in row:
        text = row.pop("content_text")
        row["content"] = (
            content_filter.from_text(row["thread_id"], row["id"], text) if content_filter else text
        )
    return step_row_to_dict(row)


def step_dicts(thread_id: uuid.UUID, *, messages_only: bool = False) -> list[dict[str, Any]]:
    """The transcript of a thread as StepDicts in ``seq`` order."""
    steps = Step.objects.filter(thread_id=thread_id)
    if messages_only:
        steps = steps.filter(type__contains="message")
    return [_step_dict(row) for row in _step_values(steps.order_by("seq"))]


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


# --- API reads ------------------------------------------------------------------------


def owned_threads(user: AbstractBaseUser) -> QuerySet[Thread]:
    """The user's live threads; every API lookup starts here, so a foreign, deleted or
    missing id is simply not found."""
    return Thread.objects.select_related("owner").filter(owner=user, deleted_at__isnull=True)


def history_page(thread_id: uuid.UUID, *, after_seq: int, limit: int) -> tuple[list[dict[str, Any]], bool]:
    """Up to ``limit`` StepDicts with ``seq > after_seq`` in ``seq`` order, and whether more follow."""
    rows = list(
        _step_values(Step.objects.filter(thread_id=thread_id, seq__gt=after_seq).order_by("seq"))[: limit + 1]
    )
    return [_step_dict(row) for row in rows[:limit]], len(rows) > limit


def last_step_dicts(thread_id: uuid.UUID, limit: int) -> list[dict[str, Any]]:
    """The last ``limit`` StepDicts of the transcript, in ``seq`` order."""
    rows = _step_values(Step.objects.filter(thread_id=thread_id).order_by("-seq"))[:limit]
    return [_step_dict(row) for row in reversed(list(rows))]


def pending_dicts(thread_id: uuid.UUID) -> list[dict[str, Any]]:
    """Acceptance records of the thread not yet transcribed, oldest first. Their ``images``
    go through the content filter like a step's content (a photo's reference names the
    message id, which is also the id of the user step that will transcribe it)."""
    pending = AcceptedMessage.objects.filter(
        thread_id=thread_id, state=AcceptedMessage.State.PENDING
    ).order_by("accepted_at", "id")
    content_filter = content_filters.active()
    if content_filter is None:
        rows = pending.values("id", "text", "accepted_at", "images")
    else:
        rows = pending.values("id", "text", "accepted_at", images_text=content_filter.column("images"))
    return [
        {
            "id": str(row["id"]),
            "text": row["text"],
            "acceptedAt": iso(row["accepted_at"]),
            "images": (
                content_filter.from_text(thread_id, row["id"], row["images_text"])
                if content_filter
                else row["images"]
            ),
        }
        for row in rows
    ]


def thread_summary(thread: Thread) -> dict[str, Any]:
    """The ThreadDict of a thread without its transcript (``steps`` is empty)."""
    return thread_to_dict(thread)


def bootstrap(thread: Thread, *, limit: int | None = None) -> dict[str, Any]:
    """What a client needs to show a thread: ``{thread, entries, pending}``.

    ``entries`` is the transcript (the last ``limit`` steps when given), ``pending`` the sends
    accepted but not yet transcribed. The two are never compared here: the client retires a
    pending entry when a transcript user step carries its id. ``pending`` is read *before*
    the transcript, so a message transcribed between the two reads shows up in both (the
    client drops the duplicate) rather than in neither.
    """
    pending = pending_dicts(thread.pk)
    entries = step_dicts(thread.pk) if limit is None else last_step_dicts(thread.pk, limit)
    return {"thread": thread_summary(thread), "entries": entries, "pending": pending}
