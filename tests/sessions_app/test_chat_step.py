"""``chat.Step`` and ``@chat.step`` against a recording session: what is sent and saved when,
nesting, timing, errors, streaming, the Message verbs and the chat context."""

import asyncio
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from sessions_app import chat
from sessions_app.chat.context import ChatContext, current_session, turn_message
from sessions_app.chat.step import Step, current_step
from threads_app.wire import step_fields, step_row_to_dict


class RecordingSession:
    """The part of a LiveSession steps use: it records instead of writing and emitting."""

    def __init__(self) -> None:
        self.thread_id = uuid.uuid4()
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.saved: list[dict[str, Any]] = []
        self.deleted: list[uuid.UUID] = []
        self.open: dict[uuid.UUID, Any] = {}
        self.chat_context = ChatContext()
        self._seq = 0

    async def save_message(self, entry: Any) -> None:
        self.open.pop(entry.id, None)
        entry.thread_id = self.thread_id
        if entry.seq is None:
            self._seq += 1
            entry.seq = self._seq
        self.saved.append(entry.to_dict())
        self.chat_context.add(entry)

    async def emit(self, event: str, data: Any) -> None:
        self.events.append((event, data))

    def track_stream(self, entry: Any) -> None:
        self.open[entry.id] = entry

    def defer_reply(self, message: Any, event: str) -> bool:
        return False  # no hook runs here: every send is written at once

    async def delete_message(self, entry: Any) -> None:
        self.chat_context.remove(entry)
        self.deleted.append(entry.id)

    def names(self) -> list[tuple[str, Any]]:
        return [(event, data.get("name") or data.get("token")) for event, data in self.events]


@pytest.fixture
def session() -> Iterator[RecordingSession]:
    recording = RecordingSession()
    token = current_session.set(recording)  # type: ignore[arg-type]  # duck-typed LiveSession
    yield recording
    current_session.reset(token)


async def test_a_context_manager_step_is_shown_running_then_finished_with_its_timing(session):
    question = uuid.uuid4()
    turn_message.set(question)
    async with chat.Step(name="search", type="tool") as step:
        assert current_step() is step
        opened = session.events[-1]
        step.input = "weather in Paris"
        step.output = "sunny"
    assert current_step() is None
    assert opened[0] == "new_message"
    assert opened[1]["end"] is None and opened[1]["start"] is not None
    assert opened[1]["parentId"] == str(question)
    event, finished = session.events[-1]
    assert event == "update_message"
    assert finished["input"] == "weather in Paris" and finished["output"] == "sunny"
    assert finished["type"] == "tool" and finished["isError"] is False and finished["streaming"] is False
    start, end = datetime.fromisoformat(finished["start"]), datetime.fromisoformat(finished["end"])
    assert start <= end
    assert len(session.saved) == 2 and session.open == {}  # written when it opens and when it ends


async def test_steps_nest_under_the_open_step_and_siblings_share_a_parent(session):
    async with chat.Step(name="outer", type="run") as outer:
        async with (
            chat.Step(name="inner", type="llm") as inner,
            chat.Step(name="innermost", type="tool") as innermost,
        ):
            pass
        async with chat.Step(name="sibling", type="tool") as sibling:
            pass
    assert outer.parent_id is None  # no message is being answered here
    assert inner.parent_id == outer.id and innermost.parent_id == inner.id
    assert sibling.parent_id == outer.id
    explicit = chat.Step(name="pinned", parent_id=inner.id)
    async with explicit:
        pass
    assert explicit.parent_id == inner.id


async def test_concurrent_tasks_inside_a_step_each_nest_under_it_without_sharing_their_stacks(session):
    seen: dict[str, uuid.UUID | None] = {}

    async def worker(name: str) -> None:
        async with chat.Step(name=name, type="tool") as mine:
            await asyncio.sleep(0.01)
            seen[name] = mine.parent_id
            assert current_step() is mine

    async with chat.Step(name="parallel", type="run") as parent:
        await asyncio.gather(worker("a"), worker("b"))
    assert seen == {"a": parent.id, "b": parent.id}


async def test_an_exception_marks_the_step_as_an_error_records_it_and_propagates(session):
    with pytest.raises(KeyError):
        async with chat.Step(name="lookup", type="retrieval") as step:
            step.output = "partial"
            raise KeyError("missing")
    event, finished = session.events[-1]
    assert event == "update_message"
    assert finished["isError"] is True
    assert finished["output"] == "partial\nKeyError: 'missing'"
    assert finished["end"] is not None
    assert current_step() is None


async def test_the_decorator_takes_the_arguments_as_input_and_the_result_as_output(session):
    @chat.step(type="tool")
    async def add(a: int, b: int = 2) -> dict[str, int]:
        running = current_step()
        assert running is not None and running.name == "add"
        return {"sum": a + b}

    assert await add(1) == {"sum": 3}
    assert add.__name__ == "add"
    _event, opened = session.events[0]
    assert opened["input"] == '{\n  "a": 1,\n  "b": 2\n}'  # shown while it runs
    _event, finished = session.events[-1]
    assert finished["name"] == "add" and finished["type"] == "tool"
    assert finished["output"] == '{\n  "sum": 3\n}' and finished["language"] == "json"


async def test_the_decorator_with_a_name_records_a_failure_and_reraises(session):
    @chat.step(name="divider", type="tool")
    async def divide(a: int, b: int) -> float:
        return a / b

    with pytest.raises(ZeroDivisionError):
        await divide(1, 0)
    _event, finished = session.events[-1]
    assert finished["name"] == "divider" and finished["isError"] is True
    assert finished["output"] == "ZeroDivisionError: division by zero"

    @chat.step
    async def plain() -> None:
        return None

    await plain()
    assert session.events[-1][1]["name"] == "plain" and session.events[-1][1]["type"] == "undefined"
    assert session.events[-1][1]["output"] == ""


async def test_a_step_instance_decorates_too(session):
    @chat.Step(name="fetcher", type="retrieval")
    async def fetch(url: str) -> str:
        return f"page of {url}"

    assert await fetch("x") == "page of x"
    assert session.events[-1][1]["name"] == "fetcher" and session.events[-1][1]["output"] == "page of x"


def test_bad_types_are_refused_and_a_plain_step_outside_a_hook_says_so():
    with pytest.raises(ValueError, match="not one of"):
        chat.Step(name="x", type="tooling")  # type: ignore[arg-type]

    @chat.step
    def plain() -> None:
        pass

    # A plain step (tests/apps/chainlit_style/plain_step.py) runs from a hook's thread.
    with pytest.raises(RuntimeError, match="no chat session here"):
        plain()


async def test_streaming_pushes_tokens_without_writing_and_the_end_writes_once(session):
    async with chat.Step(name="writer", type="llm") as step:
        await step.stream_token("Hel")
        await step.stream_token("lo")
        await step.stream_token("")  # nothing to say: nothing sent
        await step.stream_token("{}", is_input=True)
        assert len(session.saved) == 1  # only its opening
    assert session.names() == [
        ("new_message", "writer"),
        ("stream_start", "writer"),
        ("stream_token", "lo"),
        ("stream_token", "{}"),
        ("update_message", "writer"),
    ]
    assert session.events[1][1]["output"] == "Hel" and session.events[1][1]["streaming"] is True
    assert session.events[3][1]["isInput"] is True
    assert session.saved[-1]["output"] == "Hello" and session.saved[-1]["input"] == "{}"
    assert len(session.saved) == 2


async def test_a_cancelled_step_is_left_open_for_the_session_to_keep(session):
    async def hook() -> None:
        async with chat.Step(name="slow", type="tool") as step:
            await step.stream_token("half")
            await asyncio.sleep(10)

    task = asyncio.create_task(hook())
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    [kept] = session.open.values()  # the session transcribes it as interrupted
    assert kept.name == "slow" and kept.output == "half" and kept.end is not None
    assert session.events[-1][0] == "stream_start"  # nothing awaited while cancelled


async def test_send_update_and_remove_like_a_message(session):
    step = chat.Step(name="manual", type="embedding")
    step.output = [1, 2]
    await step.send()
    assert session.events[-1][0] == "new_message" and session.events[-1][1]["language"] == "json"
    step.output = "changed"
    await step.update()
    assert session.events[-1] == ("update_message", step.to_dict())
    await step.remove()
    assert session.events[-1][0] == "delete_message" and session.deleted == [step.id]
    assert len(session.chat_context) == 0


async def test_steps_are_chat_context_entries_in_order_but_not_openai_messages(session):
    question = chat.Message("what is 2+2", type="user_message")
    await session.save_message(question)
    async with chat.Step(name="calc", type="tool") as step:
        step.output = "4"
    await chat.Message("4").send()
    entries = chat.chat_context.get()
    assert [e.type for e in entries] == ["user_message", "tool", "assistant_message"]
    assert entries[1].id == step.id and entries[1].content == "4"  # one entry per id
    assert chat.chat_context.to_openai() == [
        {"role": "user", "content": "what is 2+2"},
        {"role": "assistant", "content": "4"},
    ]


def test_a_persisted_step_reads_back_as_the_same_step():
    step = Step(name="search", type="retrieval", show_input="json")
    step.input = {"q": "x"}
    step.output = "found"
    step.seq = 4
    step.thread_id = uuid.uuid4()
    step.start = step.created_at = datetime.fromisoformat("2026-01-02T03:04:05+00:00")
    step.end = datetime.fromisoformat("2026-01-02T03:04:06+00:00")
    fields = step_fields(step.to_dict())
    row = {**fields, "id": step.id, "thread_id": step.thread_id, "seq": 4}
    wire = step_row_to_dict(row)
    for key in ("input", "output", "showInput", "start", "end", "type", "name", "parentId"):
        assert wire[key] == step.to_dict()[key], key
    again = Step.from_dict(wire)
    assert (again.id, again.input, again.output, again.seq, again.end) == (
        step.id,
        step.input,
        "found",
        4,
        step.end,
    )
