"""Transcript writes made by the pump: the user step when the engine takes a turn, the
assistant and tool steps as they complete (a turn's last reply with the turn's outcome), the
engine session id when it is reported.

Engine message ids are not always UUIDs (Claude's are ``msg_...``), so a step's id is derived
from the thread and the engine's id with uuid5: the same engine message written twice is one
step.
"""

import json
import uuid
from typing import Any

from django.utils import timezone

from sessions_app.database import database_sync_to_async
from sessions_app.runtime.engines.base import UserTurn
from threads_app import selectors, services
from threads_app.fencing import Fence
from threads_app.models import Box, Thread
from threads_app.services import upsert_step
from threads_app.wire import SHOW_INPUT_KEY, step_to_dict

STEP_NAMESPACE = uuid.UUID("6f1c2a4e-7d0b-4a53-9a5e-3f1f8f6f0c11")


def engine_step_id(thread_id: uuid.UUID, engine_id: str) -> uuid.UUID:
    return uuid.uuid5(STEP_NAMESPACE, f"{thread_id}:{engine_id}")


def user_step_id(turn: UserTurn) -> uuid.UUID:
    """A turn's user step takes the key of the first send it carries (``AcceptedMessage.key``:
    the client's id scoped by the thread, like the engine's steps)."""
    return turn.accepted_ids[0] if turn.accepted_ids else uuid.uuid4()


def user_step(
    thread_id: uuid.UUID, turn: UserTurn, author: str, fence: Fence | None = None
) -> dict[str, Any]:
    """Transcribe a turn and mark the acceptance records it carries as transcribed (under
    ``fence``: the claim of the conversation that runs it)."""
    step = services.transcribe_user_turn(
        thread_id,
        user_step_id(turn),
        author=author,
        text=turn.text,
        content=turn.content_blocks(),
        accepted_ids=turn.accepted_ids,
        message_ids=turn.message_ids,
        unqueued_ids=turn.unqueued_ids,
        fence=fence,
    )
    return step_to_dict(step)


write_user_step = database_sync_to_async(user_step)


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
    input: str = "",
    running: bool = False,
    fence: Fence | None = None,
) -> dict[str, Any]:
    """An engine's step; a ``running`` one (a tool call) has no end until it finishes."""
    now = timezone.now()
    step = upsert_step(
        thread_id,
        engine_step_id(thread_id, engine_id),
        type=type,
        name=name,
        input=input,
        output=output,
        content=content or [],
        is_error=is_error,
        metadata=metadata or {},
        start=now,
        end=None if running else now,
        fence=fence,
    )
    return step_to_dict(step)


async def write_assistant_text(
    thread_id: uuid.UUID, message_id: str, text: str, fence: Fence | None = None
) -> dict[str, Any]:
    """A complete assistant message, as both session kinds record it."""
    return await write_engine_step(
        thread_id, message_id, type="assistant_message", name="assistant", output=text, fence=fence
    )


@database_sync_to_async
def write_reply_answering(
    thread_id: uuid.UUID,
    message_id: str,
    text: str,
    answers: list[uuid.UUID],
    outcome: str,
    fence: Fence | None = None,
) -> dict[str, Any]:
    """A turn's complete assistant message with the outcome of the sends it answered: the
    turn's last database trip (``services.write_answering_step``)."""
    now = timezone.now()
    step = services.write_answering_step(
        thread_id,
        engine_step_id(thread_id, message_id),
        answers=answers,
        outcome=outcome,
        type="assistant_message",
        name="assistant",
        input="",
        output=text,
        content=[],
        is_error=False,
        metadata={},
        start=now,
        end=now,
        fence=fence,
    )
    return step_to_dict(step)


async def write_tool_call(
    thread_id: uuid.UUID, tool_use_id: str, name: str, tool_input: dict[str, Any], fence: Fence | None = None
) -> dict[str, Any]:
    """A tool call, running: its output and end land later through ``finish_tool_step``. Its
    input is kept as JSON text, shown as JSON, like the input of an app's ``chat.Step``."""
    return await write_engine_step(
        thread_id,
        tool_use_id,
        type="tool",
        name=name,
        output="",
        input=json.dumps(tool_input, indent=2, ensure_ascii=False, default=str),
        metadata={SHOW_INPUT_KEY: "json"},
        running=True,
        fence=fence,
    )


@database_sync_to_async
def finish_tool_step(
    thread_id: uuid.UUID, tool_use_id: str, output: str, is_error: bool, fence: Fence | None = None
) -> dict[str, Any] | None:
    step = services.finish_tool_step(
        engine_step_id(thread_id, tool_use_id), output=output, is_error=is_error, fence=fence
    )
    return step_to_dict(step) if step is not None else None


@database_sync_to_async
def save_engine_session_id(thread_id: uuid.UUID, engine_session_id: str, fence: Fence | None = None) -> None:
    services.save_engine_session_id(thread_id, engine_session_id, fence=fence)


@database_sync_to_async
def load_engine_session_id(thread_id: uuid.UUID) -> str | None:
    return selectors.engine_session_id_of(thread_id) or None


@database_sync_to_async
def load_integration_state(
    thread_id: uuid.UUID, box_id: uuid.UUID, me: str
) -> tuple[str | None, Fence | None]:
    """What a new integration session starts from, in one read: the thread's engine
    conversation id and the claim on its box it runs under (as ``load_runner_state``)."""
    session_id, owner, epoch = (
        Thread.objects.filter(pk=thread_id)
        .values_list("engine_session_id", "box__runtime_owner", "box__runtime_epoch")
        .get()
    )
    if not owner:
        return session_id or None, None
    fence = Fence(Box, box_id, "runtime_owner", "runtime_epoch", me, epoch if owner == me else -1)
    return session_id or None, fence


def thread_fence(thread_id: uuid.UUID, me: str, epoch: int) -> Fence:
    """The claim ``me`` runs a thread's interactive session under (``Thread.runtime_epoch``)."""
    return Fence(Thread, thread_id, "runtime_owner", "runtime_epoch", me, epoch)


@database_sync_to_async
def load_runner_state(thread_id: uuid.UUID, me: str) -> tuple[str | None, Fence | None]:
    """What a new ChatSession of the thread starts from, in one read: the engine's
    conversation id and the claim it runs under (``me`` and the thread's current token; a
    thread another process took meanwhile gives a fence that holds nothing)."""
    session_id, owner, epoch = (
        Thread.objects.filter(pk=thread_id)
        .values_list("engine_session_id", "runtime_owner", "runtime_epoch")
        .get()
    )
    if not owner:
        return session_id or None, None  # a thread nobody claimed (tests that build pools)
    return session_id or None, thread_fence(thread_id, me, epoch if owner == me else -1)


@database_sync_to_async
def pending_turns(thread_id: uuid.UUID) -> list[UserTurn]:
    """The thread's accepted chat sends that no user step has transcribed yet, oldest first."""
    return [UserTurn.of_send(m) for m in selectors.pending_sends(thread_id)]


mark_failed = database_sync_to_async(services.fail_sends)
settle_turn = database_sync_to_async(services.settle_sends)
unsettled_turns = database_sync_to_async(selectors.unsettled_turns)
engine_conversation = database_sync_to_async(selectors.engine_conversation)
