"""Transcript writes made by the pump: the user step when the engine takes a turn, the
assistant and tool steps as they complete, the engine session id when it is reported.

Engine message ids are not always UUIDs (Claude's are ``msg_...``), so a step's id is derived
from the thread and the engine's id with uuid5: the same engine message written twice is one
step.
"""

import uuid
from typing import Any

from channels.db import database_sync_to_async
from django.db import transaction
from django.utils import timezone

from sessions_app.runtime.engines.base import UserTurn
from threads_app.models import AcceptedMessage, Step, Thread
from threads_app.services import upsert_step
from threads_app.wire import step_to_dict

STEP_NAMESPACE = uuid.UUID("6f1c2a4e-7d0b-4a53-9a5e-3f1f8f6f0c11")


def engine_step_id(thread_id: uuid.UUID, engine_id: str) -> uuid.UUID:
    return uuid.uuid5(STEP_NAMESPACE, f"{thread_id}:{engine_id}")


def user_step_id(turn: UserTurn) -> uuid.UUID:
    """A turn's user step takes the id of the first send it carries (the client's id)."""
    return turn.accepted_ids[0] if turn.accepted_ids else uuid.uuid4()


@database_sync_to_async
def write_user_step(thread_id: uuid.UUID, turn: UserTurn, author: str) -> dict[str, Any]:
    """Transcribe a turn and mark the acceptance records it carries as transcribed."""
    step_id = user_step_id(turn)
    with transaction.atomic():
        step = upsert_step(
            thread_id,
            step_id,
            type="user_message",
            name=author,
            output=turn.text,
            content=turn.content_blocks(),
            metadata={"acceptedIds": [str(i) for i in turn.accepted_ids]},
            start=timezone.now(),
        )
        if turn.accepted_ids:
            AcceptedMessage.objects.filter(pk__in=turn.accepted_ids).update(
                state=AcceptedMessage.State.TRANSCRIBED, step=step
            )
    return step_to_dict(step)


@database_sync_to_async
def write_engine_step(
    thread_id: uuid.UUID,
    engine_id: str,
    *,
    type: str,
    name: str,
    output: str,
    content: list[dict[str, Any]] | None = None,
    is_error: bool = False,
    metadata: dict[str, Any] | None = None,
) -> dict[str, Any]:
    now = timezone.now()
    step = upsert_step(
        thread_id,
        engine_step_id(thread_id, engine_id),
        type=type,
        name=name,
        output=output,
        content=content or [],
        is_error=is_error,
        metadata=metadata or {},
        start=now,
        end=now,
    )
    return step_to_dict(step)


async def write_assistant_text(thread_id: uuid.UUID, message_id: str, text: str) -> dict[str, Any]:
    """A complete assistant message, as both session kinds record it."""
    return await write_engine_step(
        thread_id, message_id, type="assistant_message", name="assistant", output=text
    )


async def write_tool_call(
    thread_id: uuid.UUID, tool_use_id: str, name: str, tool_input: dict[str, Any]
) -> dict[str, Any]:
    """A tool call; its output lands later through ``finish_tool_step``."""
    return await write_engine_step(
        thread_id, tool_use_id, type="tool", name=name, output="", metadata={"input": tool_input}
    )


@database_sync_to_async
def finish_tool_step(
    thread_id: uuid.UUID, tool_use_id: str, output: str, is_error: bool
) -> dict[str, Any] | None:
    step = Step.objects.filter(pk=engine_step_id(thread_id, tool_use_id)).first()
    if step is None:
        return None
    step.output = output
    step.is_error = is_error
    step.end = timezone.now()
    step.save(update_fields=["output", "is_error", "end"])
    return step_to_dict(step)


@database_sync_to_async
def save_engine_session_id(thread_id: uuid.UUID, engine_session_id: str) -> None:
    Thread.objects.filter(pk=thread_id).update(engine_session_id=engine_session_id)


@database_sync_to_async
def load_engine_session_id(thread_id: uuid.UUID) -> str | None:
    value = Thread.objects.filter(pk=thread_id).values_list("engine_session_id", flat=True).first()
    return value or None


@database_sync_to_async
def pending_turns(thread_id: uuid.UUID) -> list[UserTurn]:
    """The thread's accepted chat sends that no user step has transcribed yet, oldest first
    (integration sends are not queued: they belong to the thread's integration session)."""
    pending = AcceptedMessage.objects.filter(
        thread_id=thread_id, state=AcceptedMessage.State.PENDING, source=AcceptedMessage.Source.CHAT
    )
    return [
        UserTurn(text=m.text, images=list(m.images), accepted_ids=[m.id])
        for m in pending.order_by("accepted_at")
    ]


@database_sync_to_async
def mark_failed(accepted_ids: list[uuid.UUID], failure: str) -> None:
    """Sends that will never be transcribed (a stop dropped them from the queue, say): not
    pending any more, with the reason the UI shows."""
    AcceptedMessage.objects.filter(pk__in=accepted_ids, state=AcceptedMessage.State.PENDING).update(
        state=AcceptedMessage.State.FAILED, failure=failure, holder=""
    )


@database_sync_to_async
def settle_turn(accepted_ids: list[uuid.UUID], outcome: str) -> None:
    """Record how the turn that transcribed these sends ended (replied, interrupted, error)."""
    AcceptedMessage.objects.filter(pk__in=accepted_ids, outcome="").update(outcome=outcome, holder="")


@database_sync_to_async
def unsettled_turns(thread_id: uuid.UUID) -> list[list[uuid.UUID]]:
    """The thread's chat turns that began (their sends transcribed) but never ended: the
    process running them died or stopped mid-turn. One list of accepted ids per turn."""
    rows = AcceptedMessage.objects.filter(
        thread_id=thread_id,
        state=AcceptedMessage.State.TRANSCRIBED,
        outcome="",
        source=AcceptedMessage.Source.CHAT,
    ).order_by("accepted_at")
    turns: dict[uuid.UUID | None, list[uuid.UUID]] = {}
    for accepted_id, step_id in rows.values_list("id", "step_id"):
        turns.setdefault(step_id, []).append(accepted_id)
    return list(turns.values())
