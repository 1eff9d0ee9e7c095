"""Thread and step dictionaries in the field names of Chainlit's ThreadDict / StepDict.

Existing Chainlit clients read these shapes, so the keys are camelCase and timestamps are
ISO-8601 strings ending in ``Z``.
"""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from threads_app import attachments
from threads_app.content_filters import show_blocks
from threads_app.models import Feedback, Step, Thread

STEP_FIELDS = (
    "id",
    "thread_id",
    "seq",
    "type",
    "name",
    "parent_id",
    "input",
    "output",
    "content",
    "metadata",
    "is_error",
    "created_at",
    "start",
    "end",
)


def iso(value: datetime | str | None) -> str | None:
    """UTC ISO-8601 with a ``Z`` suffix, the format Chainlit clients parse (text is that
    already: a read's ``iso_times.IsoTime`` column)."""
    if value is None or isinstance(value, str):
        return value
    return value.isoformat().replace("+00:00", "Z")


# How a step's input and output are shown (Chainlit's ``showInput`` and ``language``) have no
# columns: they are kept in the step's metadata under these keys and lifted out on the wire.
SHOW_INPUT_KEY = "showInput"
LANGUAGE_KEY = "language"


def step_row_to_dict(row: dict[str, Any]) -> dict[str, Any]:
    """Turn a ``Step.objects.values(*STEP_FIELDS)`` row into a StepDict. ``content`` (a user
    step's blocks: its photos) is there only when the step has blocks: Chainlit's StepDict has
    no such key, and its client appends stream tokens to ``content`` instead of ``output``
    when a message has one."""
    return step_values_to_dict(
        [row.get(name) for name in STEP_FIELDS], content=row["content"], metadata=row["metadata"]
    )


def step_values_to_dict(values: Sequence[Any], *, content: Any, metadata: Any) -> dict[str, Any]:
    """``step_row_to_dict`` of a row's values in ``STEP_FIELDS`` order, with its ``content``
    and ``metadata`` as they are shown (the values at their places are not read): a
    transcript read makes thousands of StepDicts from its rows' tuples with no dict between."""
    shown = metadata if isinstance(metadata, dict) else {}
    parent_id = values[5]
    step = {
        "id": str(values[0]),
        "threadId": str(values[1]),
        "parentId": str(parent_id) if parent_id else None,
        "seq": values[2],
        "type": values[3],
        "name": values[4],
        "input": values[6] or "",
        "output": values[7],
        "content": content,
        "metadata": metadata,
        "isError": values[10],
        "streaming": False,
        "createdAt": iso(values[11]),
        "start": iso(values[12]),
        "end": iso(values[13]),
        "showInput": shown.get(SHOW_INPUT_KEY, False),
        "language": shown.get(LANGUAGE_KEY),
    }
    if not content:
        del step["content"]
    return step


def live_user_step(step: dict[str, Any]) -> dict[str, Any]:
    """A turn's user step as it is shown when the turn begins: under the id the sending client
    chose for its (first) send. Chainlit's client drew the message under that id when it was
    sent, so it updates that copy instead of drawing a second one. Reads of the transcript
    show the step's own id (the send's key, scoped by the thread); both name the client's ids
    in ``metadata.acceptedIds``, which is how a client knows them for one step."""
    shown_as = client_id_of(step)
    return {**step, "id": shown_as} if shown_as else step


def client_id_of(step: dict[str, Any]) -> str | None:
    """The id the sending client chose for a user step's (first) send, if it has one."""
    accepted = (step.get("metadata") or {}).get("acceptedIds") or []
    return str(accepted[0]) if step.get("type") == "user_message" and accepted else None


def feedback_to_dict(feedback_id: Any, step_id: Any, value: int, comment: str | None) -> dict[str, Any]:
    """Chainlit's FeedbackDict: ``{id, forId, value, comment}``, value 0 (down) or 1 (up),
    comment null when none was written."""
    return {"id": str(feedback_id), "forId": str(step_id), "value": value, "comment": comment or None}


def feedback_dict(feedback: Feedback) -> dict[str, Any]:
    """The FeedbackDict of a model instance."""
    return feedback_to_dict(feedback.pk, feedback.step_id, feedback.value, feedback.comment)


def step_to_dict(step: Step) -> dict[str, Any]:
    """The StepDict of a model instance, its content shown as transcript reads show it
    (``content_filters``: photos become references)."""
    row = {field: getattr(step, field) for field in STEP_FIELDS}
    row["content"] = show_blocks(step.thread_id, step.id, step.content)
    return step_row_to_dict(row)


def thread_to_dict(
    thread: Thread, steps: list[dict[str, Any]] | None = None, *, only_their_elements: bool = False
) -> dict[str, Any]:
    """A ThreadDict; ``steps`` are StepDicts already in transcript order. Its ``elements``
    are the thread's, or with ``only_their_elements`` those attached to ``steps`` (a read
    that left older steps out)."""
    owner = thread.owner
    return {
        "id": str(thread.id),
        "createdAt": iso(thread.created_at),
        "updatedAt": iso(thread.updated_at),
        "name": thread.name,
        "userId": str(owner.pk),
        "userIdentifier": owner.get_username(),
        "tags": [thread.chat_profile] if thread.chat_profile else [],
        "metadata": thread.metadata,
        "steps": steps if steps is not None else [],
        # Listed with the transcript only: a thread list does not read every thread's files.
        "elements": (
            attachments.elements_of(
                thread.id, [step["id"] for step in steps] if only_their_elements else None
            )
            if steps is not None
            else []
        ),
    }


def parse_iso(value: str | None) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def step_fields(step: dict[str, Any]) -> dict[str, Any]:
    """The ``Step`` model fields of a StepDict (the inverse of ``step_row_to_dict``)."""
    metadata = dict(step.get("metadata") or {})
    for key in (SHOW_INPUT_KEY, LANGUAGE_KEY):
        if step.get(key):
            metadata[key] = step[key]
    return {
        "type": step.get("type") or "undefined",
        "name": (step.get("name") or "")[:255],
        "parent_id": step.get("parentId") or None,
        "input": step.get("input") or "",
        "output": step.get("output") or "",
        "content": step.get("content") or [],
        "metadata": metadata,
        "is_error": bool(step.get("isError")),
        "created_at": parse_iso(step.get("createdAt")),
        "start": parse_iso(step.get("start")),
        "end": parse_iso(step.get("end")),
    }
