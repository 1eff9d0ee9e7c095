"""The Claude engine, through the real ``claude_agent_sdk`` client, against a stand-in CLI.

``tests/support/fake_claude_cli.py`` plays the Claude Code CLI: the SDK spawns it (through
``cli_path``), does its ``initialize`` handshake with it, writes turns and interrupt control
requests to its stdin and parses its stream-json stdout, exactly as it would with the real
one. Everything between ``ClaudeEngine`` and the subprocess is the installed SDK.
"""

import asyncio
import base64
import hashlib
import json
import os
import re
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from sessions_app.runtime.engines import get_engine
from sessions_app.runtime.engines.base import EngineError, UserTurn
from sessions_app.runtime.engines.claude_engine import ClaudeEngine, ClaudeRun
from sessions_app.runtime.messages import (
    AssistantText,
    StreamDelta,
    SystemInit,
    TaskEvent,
    ToolCall,
    ToolOutput,
    TurnResult,
    UnknownMessage,
    adapt,
)

STAND_IN = Path(__file__).resolve().parents[2] / "support" / "fake_claude_cli.py"
STEP_TIMEOUT = 10.0
PREFIX = "Claude stand-in"


@pytest.fixture(scope="session")
def fake_cli(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An executable ``claude`` that runs the stand-in on this interpreter."""
    wrapper = tmp_path_factory.mktemp("fake-claude-bin") / "claude"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{STAND_IN}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return wrapper


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    path = tmp_path / "fake-claude-state"
    path.mkdir()
    return path


@pytest.fixture
def make_engine(fake_cli: Path, state_dir: Path, tmp_path: Path):
    def make(**env: str) -> ClaudeEngine:
        engine = get_engine(
            "claude",
            {
                "cli_path": str(fake_cli),
                "cwd": str(tmp_path),
                "model": "claude-stand-in-1",
                "env": {"FAKE_CLAUDE_STATE_DIR": str(state_dir), **env},
            },
        )
        assert isinstance(engine, ClaudeEngine)
        return engine

    return make


class Reader:
    """One iterator over a run's messages, read a turn at a time."""

    def __init__(self, run: ClaudeRun) -> None:
        self.run = run
        self.iterator: AsyncIterator[dict[str, Any]] = run.messages()

    async def next(self) -> dict[str, Any]:
        return await asyncio.wait_for(anext(self.iterator), STEP_TIMEOUT)

    async def until(self, kind: str) -> list[dict[str, Any]]:
        """Messages up to and including the first of type ``kind``."""
        seen = []
        while True:
            message = await self.next()
            seen.append(message)
            if message["type"] == kind:
                return seen

    async def rest(self) -> list[dict[str, Any]]:
        return [m async for m in self.iterator]


def of_type(messages: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [m for m in messages if m["type"] == kind]


def invocations(state_dir: Path) -> list[list[str]]:
    lines = (state_dir / "invocations.jsonl").read_text().splitlines()
    return [json.loads(line)["argv"] for line in lines]


def stdin_lines(state_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (state_dir / "stdin.jsonl").read_text().splitlines()]


def user_lines(state_dir: Path) -> list[dict[str, Any]]:
    return [line for line in stdin_lines(state_dir) if line["type"] == "user"]


async def test_a_fresh_run_reports_its_id_streams_the_reply_and_ends_the_turn(make_engine, state_dir):
    run = await make_engine().start()
    reader = Reader(run)
    try:
        init = await reader.next()
        assert init["type"] == "system" and init["subtype"] == "init"
        session_id = init["session_id"]
        uuid.UUID(session_id)  # coined by the engine, before any turn
        assert adapt(init) == [SystemInit(session_id)]

        argv = invocations(state_dir)[0]
        assert argv[:4] == ["--output-format", "stream-json", "--verbose", "--system-prompt"]
        assert argv[-2:] == ["--input-format", "stream-json"]
        assert f"--session-id={session_id}" in argv
        assert "--include-partial-messages" in argv
        assert argv[argv.index("--model") + 1] == "claude-stand-in-1"
        assert not any(a.startswith("--resume") for a in argv)
        [handshake] = stdin_lines(state_dir)  # connect() waited for its control_response
        assert handshake["type"] == "control_request"
        assert handshake["request"] == {"subtype": "initialize", "hooks": None}

        await run.send(UserTurn(text="hello there world"))
        turn = await reader.until("result")
        reply = f"{PREFIX} (turn 1): hello there world"
        deltas = of_type(turn, "stream_event")
        assert len(deltas) == len(reply.split(" "))
        assert "".join(d["delta"] for d in deltas) == reply
        [assistant] = of_type(turn, "assistant")
        assert {d["message_id"] for d in deltas} == {assistant["message_id"]}
        assert assistant["message_id"].startswith("msg_")
        assert assistant["content"] == [{"type": "text", "text": reply}]
        result = turn[-1]
        assert result["subtype"] == "success" and result["is_error"] is False
        assert result["session_id"] == session_id and result["result"] == reply
        # The CLI's per-turn init repeats the known id: not reported again. Its per-turn
        # ``system``/``status`` frame is passed through (the adapter surfaces it as unknown);
        # command_lifecycle and sdk_host_only session-state frames never get past the SDK.
        assert {m["type"] for m in turn} == {"system", "stream_event", "assistant", "result"}
        assert [m["subtype"] for m in of_type(turn, "system")] == ["status"]

        adapted = [item for m in turn for item in adapt(m)]
        assert [type(a) for a in adapted if not isinstance(a, StreamDelta | UnknownMessage)] == [
            AssistantText,
            TurnResult,
        ]
        assert adapted[-1] == TurnResult(session_id, "success", False, reply)

        await run.send(UserTurn(text="again"))
        turn = await reader.until("result")
        assert turn[-1]["result"] == f"{PREFIX} (turn 2): again"
    finally:
        await run.close()
    assert run.closed.is_set()


async def test_a_resumed_run_reports_the_resumed_id_and_the_cli_gets_resume(make_engine, state_dir):
    engine = make_engine()
    first = await engine.start()
    reader = Reader(first)
    session_id = (await reader.next())["session_id"]
    await first.send(UserTurn(text="remember me"))
    assert (await reader.until("result"))[-1]["result"] == f"{PREFIX} (turn 1): remember me"
    await first.close()

    second = await engine.start(resume=session_id)
    reader = Reader(second)
    try:
        assert await reader.next() == {"type": "system", "subtype": "init", "session_id": session_id}
        argv = invocations(state_dir)[1]
        assert f"--resume={session_id}" in argv
        assert not any(a.startswith("--session-id") for a in argv)
        await second.send(UserTurn(text="still there?"))
        turn = await reader.until("result")
        assert turn[-1]["result"] == f"{PREFIX} (turn 2): still there?"
        assert turn[-1]["session_id"] == session_id
        assert all(m.get("subtype") != "init" for m in turn)
    finally:
        await second.close()


async def test_resuming_an_unknown_conversation_fails_to_start(make_engine):
    missing = str(uuid.uuid4())
    with pytest.raises(EngineError, match=f"No conversation found with session ID: {missing}"):
        await make_engine().start(resume=missing)


async def test_a_missing_cli_fails_to_start(tmp_path):
    engine = ClaudeEngine({"cli_path": str(tmp_path / "no-such-claude"), "cwd": str(tmp_path)})
    with pytest.raises(EngineError, match="could not start the Claude CLI"):
        await engine.start()


async def test_an_image_block_reaches_the_cli_intact(make_engine, state_dir):
    data = base64.b64encode(os.urandom(300_000)).decode()
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}
    run = await make_engine().start()
    reader = Reader(run)
    try:
        await reader.next()
        await run.send(UserTurn(text="what is this?", images=[image]))
        turn = await reader.until("result")
    finally:
        await run.close()

    [line] = user_lines(state_dir)
    assert line["message"] == {"role": "user", "content": [image, {"type": "text", "text": "what is this?"}]}
    assert line["parent_tool_use_id"] is None and line["session_id"] == "default"
    uuid.UUID(line["uuid"])  # the stamp results are matched by
    digest = hashlib.sha256(data.encode()).hexdigest()[:12]
    assert turn[-1]["result"] == f"{PREFIX} (turn 1): what is this? [image image/png {len(data)} {digest}]"


async def test_an_interrupt_mid_turn_ends_it_as_interrupted(make_engine, state_dir):
    run = await make_engine().start()
    reader = Reader(run)
    try:
        await reader.next()
        await run.send(UserTurn(text="!slow 0.15\none two three four five six seven eight nine ten"))
        first = await reader.until("stream_event")
        started = time.monotonic()
        await run.interrupt()
        turn = first + await reader.until("result")
        assert time.monotonic() - started < 2.0
        requests = [line["request"] for line in stdin_lines(state_dir) if line["type"] == "control_request"]
        assert requests[1:] == [{"subtype": "interrupt"}]

        result = turn[-1]
        assert result["subtype"] == "interrupted" and result["is_error"] is False
        assert result["terminal_reason"] == "aborted_streaming"
        assert result["sdk_subtype"] == "error_during_execution"
        adapted = adapt(result)[0]
        assert isinstance(adapted, TurnResult) and adapted.outcome == "interrupted"
        streamed = "".join(d["delta"] for d in of_type(turn, "stream_event"))
        assert not streamed.endswith("ten")
        # The CLI reports what was said before the abort; its "[Request interrupted by user]"
        # marker is a user message without tool results, so it is not passed on.
        [partial] = of_type(turn, "assistant")
        assert partial["content"][0]["text"] == streamed
        assert not of_type(turn, "user")

        await run.send(UserTurn(text="after"))
        assert (await reader.until("result"))[-1]["result"] == f"{PREFIX} (turn 2): after"
    finally:
        await run.close()


async def test_close_mid_turn_ends_the_iterator_and_sets_closed(make_engine):
    run = await make_engine().start()
    reader = Reader(run)
    await reader.next()
    await run.send(UserTurn(text="!slow 0.3\na long slow answer that will not finish"))
    await reader.until("stream_event")
    started = time.monotonic()
    await run.close()
    assert time.monotonic() - started < 4.0
    assert run.closed.is_set()
    rest = await asyncio.wait_for(reader.rest(), STEP_TIMEOUT)
    assert not of_type(rest, "result")
    assert [m async for m in run.messages()] == []  # a later iteration ends at once too
    with pytest.raises(EngineError):
        await run.send(UserTurn(text="too late"))
    await run.interrupt()  # moot, and quiet
    await run.close()  # idempotent


async def test_tool_calls_results_and_separate_text_blocks(make_engine):
    run = await make_engine().start()
    reader = Reader(run)
    try:
        await reader.next()
        await run.send(UserTurn(text="!tool\n!blocks\nlist"))
        turn = await reader.until("result")
    finally:
        await run.close()
    assistants = of_type(turn, "assistant")
    tool_use = assistants[0]["content"][0]
    assert tool_use["type"] == "tool_use" and tool_use["name"] == "Bash"
    assert tool_use["input"] == {"command": "echo list"}
    [user] = of_type(turn, "user")
    assert user["content"] == [
        {"type": "tool_result", "tool_use_id": tool_use["id"], "content": "LIST", "is_error": False}
    ]
    # Two text blocks of one API message: one wire id each, deltas keyed the same way.
    first, second = assistants[1:]
    assert second["message_id"] == f"{first['message_id']}:1"
    by_id: dict[str, str] = {}
    for delta in of_type(turn, "stream_event"):
        by_id[delta["message_id"]] = by_id.get(delta["message_id"], "") + delta["delta"]
    assert by_id == {
        first["message_id"]: first["content"][0]["text"],
        second["message_id"]: "And a second block.",
    }
    adapted = [a for m in turn for a in adapt(m) if not isinstance(a, StreamDelta | UnknownMessage)]
    assert [type(a) for a in adapted] == [ToolCall, ToolOutput, AssistantText, AssistantText, TurnResult]
    assert adapted[1] == ToolOutput(tool_use["id"], "LIST", False)


async def test_task_events_and_unmodelled_messages_are_passed_on(make_engine):
    run = await make_engine().start()
    reader = Reader(run)
    try:
        await reader.next()
        await run.send(UserTurn(text="!task\n!rate\nhi"))
        turn = await reader.until("result")
    finally:
        await run.close()
    tasks = of_type(turn, "task")
    assert [(t["status"], t["description"]) for t in tasks] == [
        ("started", "stand-in task"),
        ("completed", "stand-in task done"),
    ]
    assert tasks[0]["task_id"] == tasks[1]["task_id"]
    assert isinstance(adapt(tasks[0])[0], TaskEvent)
    [rate] = of_type(turn, "rate_limit_event")
    assert rate["rate_limit_info"]["status"] == "allowed_warning"
    assert adapt(rate) == []  # on the adapter's list of noise, dropped on purpose


@pytest.mark.parametrize("cli_reports_uuids", [True, False], ids=["uuids", "origin-fallback"])
async def test_results_that_are_not_for_our_prompt_do_not_end_a_turn(make_engine, cli_reports_uuids):
    env = {} if cli_reports_uuids else {"FAKE_CLAUDE_NO_UUIDS": "1"}
    run = await make_engine(**env).start()
    reader = Reader(run)
    try:
        await reader.next()
        await run.send(UserTurn(text="!inject\nhi"))
        assert (await reader.until("result"))[-1]["result"] == f"{PREFIX} (turn 1): hi"
        # With our next prompt outstanding, the CLI first runs a task-notification turn of its
        # own and sends a stray empty result (num_turns 0): neither is a ``result`` of ours.
        await run.send(UserTurn(text="next"))
        between = await reader.until("result")
        assert [a["content"][0]["text"] for a in of_type(between, "assistant")] == [
            "Background work finished.",
            f"{PREFIX} (turn 2): next",
        ]
        unclaimed = of_type(between, "unclaimed_result")
        assert [(u["result"], u["num_turns"]) for u in unclaimed] == [
            ("Background work finished.", 1),
            ("", 0),
        ]
        assert isinstance(adapt(unclaimed[0])[0], UnknownMessage)
        assert len(of_type(between, "result")) == 1
        assert between[-1]["result"] == f"{PREFIX} (turn 2): next"
    finally:
        await run.close()


async def test_an_api_error_ends_the_turn_as_an_error(make_engine):
    run = await make_engine().start()
    reader = Reader(run)
    try:
        await reader.next()
        await run.send(UserTurn(text="!fail\nhi"))
        result = (await reader.until("result"))[-1]
        assert result["subtype"] == "error" and result["is_error"] is True
        assert result["result"] == "API Error: 500 stand-in failure"
        await run.send(UserTurn(text="recovered"))
        assert (await reader.until("result"))[-1]["subtype"] == "success"
    finally:
        await run.close()


async def test_a_crashing_cli_closes_the_run_with_an_error(make_engine):
    run = await make_engine().start()
    reader = Reader(run)
    await reader.next()
    await run.send(UserTurn(text="!crash\nhi"))
    with pytest.raises(EngineError, match="exit code 3"):
        while True:
            await reader.next()
    await asyncio.wait_for(run.closed.wait(), STEP_TIMEOUT)
    with pytest.raises(EngineError):
        await run.send(UserTurn(text="anyone?"))
    await run.close()


def test_the_stand_in_refuses_a_command_line_the_sdk_would_not_build(fake_cli, state_dir):
    env = {**os.environ, "FAKE_CLAUDE_STATE_DIR": str(state_dir)}
    done = subprocess.run(
        [str(fake_cli), "--output-format", "json"], env=env, capture_output=True, text=True, timeout=10
    )
    assert done.returncode == 2 and re.search("stream-json", done.stderr)
