"""The adapter and both sessions' switches are exhaustive over the message union."""

import dataclasses
import typing
import uuid
from typing import Any

import pytest

from sessions_app.runtime import messages
from sessions_app.runtime.chat_session import ChatSession
from sessions_app.runtime.phases import LEGAL_MOVES, InvariantError, Phase, is_busy, is_running, transition
from sessions_app.runtime.thread_session import ChatThreadSession

SAMPLES: dict[type, dict[str, Any]] = {
    messages.SystemInit: {"type": "system", "subtype": "init", "session_id": "s"},
    messages.StreamDelta: {"type": "stream_event", "message_id": "m", "delta": "hi"},
    messages.AssistantText: {
        "type": "assistant",
        "message_id": "m",
        "content": [{"type": "text", "text": "hi"}],
    },
    messages.ToolCall: {
        "type": "assistant",
        "message_id": "m",
        "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {}}],
    },
    messages.ToolOutput: {
        "type": "user",
        "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok", "is_error": False}],
    },
    messages.TaskEvent: {"type": "task", "task_id": "1", "status": "started"},
    messages.TurnResult: {"type": "result", "subtype": "success", "session_id": "s", "is_error": False},
    messages.UnknownMessage: {"type": "conversation_reset"},
}


def test_every_union_member_has_an_engine_message_that_adapts_to_it():
    members = set(typing.get_args(messages.ChatMessage))
    assert members == set(SAMPLES), "a new message type needs a sample here and a case in both sessions"
    for member, raw in SAMPLES.items():
        assert [type(m) for m in messages.adapt(raw)] == [member]


def test_unknown_engine_messages_are_surfaced_and_counted_not_dropped():
    before = messages.unknown_messages.value
    (adapted,) = messages.adapt({"type": "brand_new_thing", "x": 1})
    assert isinstance(adapted, messages.UnknownMessage) and adapted.raw["x"] == 1
    assert messages.unknown_messages.value == before + 1


@pytest.mark.parametrize(
    "raw",
    [{"type": "rate_limit_event"}, {"type": "tool_progress"}, {"type": "system", "subtype": "status"}],
)
def test_listed_noise_is_dropped_on_purpose(raw):
    assert messages.adapt(raw) == []


@dataclasses.dataclass(frozen=True)
class NotInTheUnion:
    value: int = 0


@pytest.mark.parametrize("kind", [ChatSession, ChatThreadSession])
async def test_a_message_type_outside_the_union_fails_loudly(kind):
    session = kind.__new__(kind)
    session.thread_id = uuid.uuid4()
    with pytest.raises(AssertionError):
        await session.on_message(NotInTheUnion())


def test_the_phase_table_is_the_reference_one():
    expected = {
        ("idle", "starting"),
        ("starting", "ready"),
        ("starting", "idle"),
        ("ready", "streaming"),
        ("ready", "stopping"),
        ("ready", "idle"),
        ("streaming", "ready"),
        ("streaming", "stopping"),
        ("streaming", "idle"),
        ("stopping", "idle"),
    }
    assert {(a.value, b.value) for a, targets in LEGAL_MOVES.items() for b in targets} == expected
    for a in Phase:
        for b in Phase:
            if (a.value, b.value) in expected:
                assert transition(a, b) is b
            else:
                with pytest.raises(InvariantError):
                    transition(a, b)


def test_running_and_busy_follow_the_reference_table():
    assert [is_running(p) for p in Phase] == [False, False, True, True, True]
    assert [is_busy(p) for p in Phase] == [False, True, False, True, False]
    assert is_busy(Phase.STOPPING, was_busy=True)
