#!/usr/bin/env python3
"""A stand-in for the Claude Code CLI, for driving the real Claude Agent SDK in tests.

It speaks the protocol ``claude_agent_sdk`` (0.2.x) drives the real CLI with, as observed from
Claude Code 2.1.332 against a local fake Messages API: the SDK starts it as
``claude --output-format stream-json --verbose [--system-prompt ...] [--model M]
[--permission-mode P] [--resume=ID | --session-id=UUID] [--include-partial-messages]
--input-format stream-json`` and then

- stdin carries JSON lines: ``control_request`` (``initialize`` first, answered before any
  turn; ``interrupt`` mid-turn) and ``user`` messages
  ``{"type":"user","message":{"role":"user","content":...},"parent_tool_use_id":null,
  "session_id":...,"uuid":...}``;
- stdout carries JSON lines: ``control_response``
  ``{"type":"control_response","response":{"subtype":"success"|"error","request_id",...}}`` and,
  per turn, ``system``/``init`` (every turn), ``system``/``status``, ``stream_event`` frames
  (raw API events: ``message_start``, ``content_block_start``, ``content_block_delta``
  ``text_delta`` ..., only with ``--include-partial-messages``), one ``assistant`` message per
  content block, and a ``result`` carrying ``user_message_uuid(s)`` of the prompts it took in;
  plus frames the SDK filters out (``command_lifecycle``, and ``session_state_changed`` marked
  ``sdk_host_only`` when ``CLAUDE_CODE_SDK_READS_SESSION_STATE`` is set);
- an interrupt ends the turn with the partial ``assistant`` message, a
  ``[Request interrupted by user]`` user message and a ``result`` with subtype
  ``error_during_execution``, ``is_error`` true and ``terminal_reason`` ``aborted_streaming``;
- ``--resume`` of an unknown conversation writes an error ``result`` ("No conversation found
  with session ID: ...") and exits 1 without answering ``initialize``;
- stdin EOF ends the process (exit 1 if the last result was an error, as the real CLI does).

Replies read ``Claude stand-in (turn N): <text>``, streamed word by word, N counting the
conversation's turns (kept per session id in ``$FAKE_CLAUDE_STATE_DIR/sessions``, so a resumed
conversation carries on counting); each image block adds
`` [image <media type> <length of the base64 data> <sha256 of it, 12 hex digits>]``.
Every invocation's argv is appended to ``invocations.jsonl`` and every stdin line, verbatim, to
``stdin.jsonl`` in the state directory.

Directives, one per line at the start of a message: ``!slow SECONDS`` (pause before each
word), ``!fail`` (end with an API-error result), ``!crash`` (exit 3 after the first word),
``!tool`` (call a tool first), ``!blocks`` (answer in two text blocks of one API message),
``!task`` (report a background task), ``!rate`` (report a rate-limit event), ``!inject``
(once the next message has arrived, and before answering it, run an injected
task-notification turn and send a stray empty result: the hardest case for telling results
apart, since a prompt of the client's is then outstanding).
``FAKE_CLAUDE_NO_UUIDS=1`` leaves ``user_message_uuid(s)`` off results, like older CLIs.
"""

import argparse
import hashlib
import json
import os
import queue
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

VERSION = "2.1.332"

_write_lock = threading.Lock()


def emit(message: dict[str, Any]) -> None:
    with _write_lock:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def append_line(path: Path, line: str) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write(line.rstrip("\n") + "\n")


class Conversation:
    def __init__(self, state_dir: Path, session_id: str) -> None:
        self.path = state_dir / "sessions" / f"{session_id}.json"
        self.session_id = session_id
        self.turns = json.loads(self.path.read_text())["turns"] if self.path.exists() else 0

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"turns": self.turns}))
        tmp.replace(self.path)


class StandIn:
    def __init__(self, args: argparse.Namespace, conversation: Conversation) -> None:
        self.args = args
        self.conversation = conversation
        self.session_id = conversation.session_id
        self.model = args.model or "claude-stand-in-1"
        self.partial = args.include_partial_messages
        self.host_state = bool(os.environ.get("CLAUDE_CODE_SDK_READS_SESSION_STATE"))
        self.no_uuids = bool(os.environ.get("FAKE_CLAUDE_NO_UUIDS"))
        self.turns: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.interrupt = threading.Event()
        self.eof = threading.Event()
        self.counts_lock = threading.Lock()
        self.received = 0
        self.finished = 0
        self.last_result_error = False
        self.inject_before_next = False

    # --- frames ---------------------------------------------------------------------------

    def frame(self, message: dict[str, Any]) -> dict[str, Any]:
        return {**message, "session_id": self.session_id, "uuid": str(uuid.uuid4())}

    def state(self, state: str) -> None:
        if self.host_state:
            emit(
                self.frame(
                    {
                        "type": "system",
                        "subtype": "session_state_changed",
                        "state": state,
                        "sdk_host_only": True,
                    }
                )
            )

    def stream(self, event: dict[str, Any], message_id: str) -> None:
        if self.partial:
            emit(
                self.frame(
                    {
                        "type": "stream_event",
                        "event": event,
                        "parent_tool_use_id": None,
                        "api_message_id": message_id,
                    }
                )
            )

    def assistant(self, message_id: str, block: dict[str, Any], **extra: Any) -> None:
        message = {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [block],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 5, "output_tokens": 1},
        }
        emit(self.frame({"type": "assistant", "message": message, "parent_tool_use_id": None, **extra}))

    def result(self, prompt_uuid: str | None, **fields: Any) -> None:
        message: dict[str, Any] = {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "duration_ms": 12,
            "duration_api_ms": 10,
            "num_turns": 1,
            "result": None,
            "stop_reason": "end_turn",
            "total_cost_usd": 0.0,
            "usage": {"input_tokens": 5, "output_tokens": 9},
            "modelUsage": {},
            "permission_denials": [],
            "terminal_reason": "completed",
            **fields,
        }
        if prompt_uuid and not self.no_uuids:
            message["user_message_uuid"] = prompt_uuid
            message["user_message_uuids"] = [prompt_uuid]
        self.last_result_error = bool(message["is_error"])
        emit(self.frame(message))

    # --- stdin ----------------------------------------------------------------------------

    def read_stdin(self, log: Path) -> None:
        for line in sys.stdin:
            if not line.strip():
                continue
            append_line(log, line)
            message = json.loads(line)
            kind = message.get("type")
            if kind == "control_request":
                self.control(message["request_id"], message.get("request") or {})
            elif kind == "user":
                with self.counts_lock:
                    self.received += 1
                self.turns.put(message)
        self.eof.set()
        self.turns.put(None)

    def control(self, request_id: str, request: dict[str, Any]) -> None:
        subtype = request.get("subtype")
        if subtype == "initialize":
            response: dict[str, Any] = {
                "commands": [],
                "agents": [],
                "output_style": "default",
                "available_output_styles": ["default"],
                "models": [],
                "account": {},
                "pid": os.getpid(),
                "claude_code_version": VERSION,
                "current_permission_mode": self.args.permission_mode or "default",
                "capabilities": [],
            }
        elif subtype == "interrupt":
            with self.counts_lock:
                if self.received > self.finished:  # a turn is running or queued
                    self.interrupt.set()
            response = {"still_queued": []}
        else:
            emit(
                {
                    "type": "control_response",
                    "response": {
                        "subtype": "error",
                        "request_id": request_id,
                        "error": f"Unsupported control request subtype: {subtype}",
                    },
                }
            )
            return
        emit(
            {
                "type": "control_response",
                "response": {"subtype": "success", "request_id": request_id, "response": response},
            }
        )

    # --- turns ----------------------------------------------------------------------------

    def run(self) -> int:
        while (message := self.turns.get()) is not None:
            try:
                self.answer(message)
            finally:
                with self.counts_lock:
                    self.finished += 1
                self.interrupt.clear()
        return 1 if self.last_result_error else 0

    def answer(self, message: dict[str, Any]) -> None:
        prompt_uuid = message.get("uuid")
        content = message["message"]["content"]
        blocks: list[dict[str, Any]] = (
            [{"type": "text", "text": content}] if isinstance(content, str) else content
        )
        text, directives = parse("\n\n".join(b.get("text", "") for b in blocks if b.get("type") == "text"))
        if self.inject_before_next:
            self.inject_before_next = False
            self.injected_turn()
        self.conversation.turns += 1
        self.conversation.save()

        self.state("running")
        if prompt_uuid:
            for state in ("queued", "started"):
                emit(self.frame({"type": "command_lifecycle", "command_uuid": prompt_uuid, "state": state}))
        emit(
            self.frame(
                {
                    "type": "system",
                    "subtype": "init",
                    "cwd": os.getcwd(),
                    "tools": [],
                    "mcp_servers": [],
                    "model": self.model,
                    "permissionMode": self.args.permission_mode or "default",
                    "slash_commands": [],
                    "apiKeySource": "none",
                    "claude_code_version": VERSION,
                    "output_style": "default",
                    "agents": [],
                    "skills": [],
                    "plugins": [],
                }
            )
        )
        emit(self.frame({"type": "system", "subtype": "status", "status": "requesting"}))
        if directives.get("rate"):
            info = {
                "status": "allowed_warning",
                "resetsAt": int(time.time()) + 3600,
                "rateLimitType": "five_hour",
                "utilization": 0.9,
            }
            emit(self.frame({"type": "rate_limit_event", "rate_limit_info": info}))
        task_id = f"task-{uuid.uuid4().hex[:8]}"
        if directives.get("task"):
            emit(
                self.frame(
                    {
                        "type": "system",
                        "subtype": "task_started",
                        "task_id": task_id,
                        "description": "stand-in task",
                        "task_type": "local_bash",
                    }
                )
            )
        if directives.get("tool"):
            self.tool_call(text)

        reply = f"Claude stand-in (turn {self.conversation.turns}): {text}"
        for block in blocks:
            if block.get("type") == "image":
                data = str((block.get("source") or {}).get("data", ""))
                digest = hashlib.sha256(data.encode()).hexdigest()[:12]
                reply += f" [image {block['source'].get('media_type')} {len(data)} {digest}]"
        parts = [reply]
        if directives.get("blocks"):
            parts = [reply, "And a second block."]
        message_id = f"msg_{uuid.uuid4().hex[:24]}"
        self.stream(
            {
                "type": "message_start",
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": self.model,
                    "content": [],
                    "stop_reason": None,
                    "usage": {"input_tokens": 5, "output_tokens": 1},
                },
            },
            message_id,
        )
        said = ""
        for index, part in enumerate(parts):
            self.stream(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                },
                message_id,
            )
            said = ""
            for n, word in enumerate(part.split(" ")):
                if directives["slow"]:
                    self.interrupt.wait(directives["slow"])
                if self.eof.is_set():
                    return
                if self.interrupt.is_set():
                    self.interrupted(prompt_uuid, message_id, index, said)
                    return
                piece = word if n == 0 else " " + word
                said += piece
                self.stream(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": piece},
                    },
                    message_id,
                )
                if directives.get("crash"):
                    os._exit(3)
            self.assistant(message_id, {"type": "text", "text": part})
            self.stream({"type": "content_block_stop", "index": index}, message_id)
        self.stream(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 9},
            },
            message_id,
        )
        self.stream({"type": "message_stop"}, message_id)
        if directives.get("task"):
            emit(
                self.frame(
                    {
                        "type": "system",
                        "subtype": "task_notification",
                        "task_id": task_id,
                        "status": "completed",
                        "output_file": "",
                        "summary": "stand-in task done",
                    }
                )
            )
        if directives.get("fail"):
            self.result(
                prompt_uuid, is_error=True, result="API Error: 500 stand-in failure", api_error_status=500
            )
        else:
            self.result(prompt_uuid, result="\n\n".join(parts))
        if prompt_uuid:
            emit(self.frame({"type": "command_lifecycle", "command_uuid": prompt_uuid, "state": "completed"}))
        self.state("idle")
        self.inject_before_next = bool(directives.get("inject"))

    def tool_call(self, text: str) -> None:
        message_id = f"msg_{uuid.uuid4().hex[:24]}"
        tool_id = f"toolu_{uuid.uuid4().hex[:20]}"
        block = {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": f"echo {text}"}}
        self.stream(
            {
                "type": "message_start",
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": self.model,
                    "content": [],
                    "stop_reason": None,
                    "usage": {},
                },
            },
            message_id,
        )
        self.stream(
            {"type": "content_block_start", "index": 0, "content_block": {**block, "input": {}}}, message_id
        )
        self.stream(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])},
            },
            message_id,
        )
        self.assistant(message_id, block)
        self.stream({"type": "content_block_stop", "index": 0}, message_id)
        self.stream(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {},
            },
            message_id,
        )
        self.stream({"type": "message_stop"}, message_id)
        result = {"type": "tool_result", "tool_use_id": tool_id, "content": text.upper(), "is_error": False}
        emit(
            self.frame(
                {"type": "user", "message": {"role": "user", "content": [result]}, "parent_tool_use_id": None}
            )
        )

    def interrupted(self, prompt_uuid: str | None, message_id: str, index: int, said: str) -> None:
        if said:
            self.assistant(message_id, {"type": "text", "text": said}, aborted=True)
        user = {"role": "user", "content": [{"type": "text", "text": "[Request interrupted by user]"}]}
        emit(self.frame({"type": "user", "message": user, "parent_tool_use_id": None}))
        self.stream({"type": "content_block_stop", "index": index}, message_id)
        self.stream({"type": "message_stop"}, message_id)
        self.result(
            prompt_uuid,
            subtype="error_during_execution",
            is_error=True,
            num_turns=2,
            stop_reason=None,
            terminal_reason="aborted_streaming",
            errors=["[ede_diagnostic] result_type=user last_content_type=n/a stop_reason=null"],
        )
        if prompt_uuid:
            emit(self.frame({"type": "command_lifecycle", "command_uuid": prompt_uuid, "state": "cancelled"}))
        self.state("idle")

    def injected_turn(self) -> None:
        """What the CLI does on its own between our turns: a finished background task wakes the
        conversation (a turn with a task-notification origin and no prompt of ours), and some
        versions send a stray empty result with ``num_turns`` 0."""
        self.state("running")
        message_id = f"msg_{uuid.uuid4().hex[:24]}"
        text = "Background work finished."
        self.stream(
            {
                "type": "message_start",
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": self.model,
                    "content": [],
                    "stop_reason": None,
                    "usage": {},
                },
            },
            message_id,
        )
        self.stream(
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            message_id,
        )
        self.stream(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
            message_id,
        )
        self.assistant(message_id, {"type": "text", "text": text})
        self.stream({"type": "content_block_stop", "index": 0}, message_id)
        self.stream({"type": "message_stop"}, message_id)
        self.result(None, result=text, origin={"kind": "task-notification"})
        self.result(None, result="", num_turns=0, duration_ms=0, duration_api_ms=0)
        self.state("idle")


def parse(text: str) -> tuple[str, dict[str, Any]]:
    directives: dict[str, Any] = {"slow": 0.0}
    lines = []
    for line in text.splitlines():
        word = line.strip().split(" ")
        if word[0] == "!slow" and len(word) > 1:
            directives["slow"] = float(word[1])
        elif word[0] in ("!fail", "!crash", "!tool", "!blocks", "!task", "!rate", "!inject"):
            directives[word[0][1:]] = True
        else:
            lines.append(line)
    return "\n".join(lines).strip(), directives


def main() -> int:
    parser = argparse.ArgumentParser(prog="claude", description="Claude Code CLI stand-in")
    parser.add_argument("--output-format")
    parser.add_argument("--input-format")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--system-prompt")
    parser.add_argument("--append-system-prompt")
    parser.add_argument("--model")
    parser.add_argument("--permission-mode")
    parser.add_argument("--resume")
    parser.add_argument("--session-id")
    parser.add_argument("--include-partial-messages", action="store_true")
    args, _unknown = parser.parse_known_args()

    state_dir = Path(os.environ.get("FAKE_CLAUDE_STATE_DIR") or Path(tempfile.gettempdir()) / "fake-claude")
    state_dir.mkdir(parents=True, exist_ok=True)
    append_line(
        state_dir / "invocations.jsonl",
        json.dumps({"argv": sys.argv[1:], "pid": os.getpid(), "cwd": os.getcwd()}),
    )

    if (args.output_format, args.input_format, args.verbose) != ("stream-json", "stream-json", True):
        sys.stderr.write(
            "Error: the SDK protocol needs --output-format stream-json --verbose --input-format stream-json\n"
        )
        return 2
    if args.resume and args.session_id:
        sys.stderr.write(
            "Error: --session-id can only be used with --resume if --fork-session is also specified.\n"
        )
        return 1
    if args.session_id:
        uuid.UUID(args.session_id)  # the real CLI insists on a UUID

    session_id = args.resume or args.session_id or str(uuid.uuid4())
    conversation = Conversation(state_dir, session_id)
    if args.resume and not conversation.path.exists():
        # The real CLI reports it as a result frame and exits before answering initialize;
        # reading the request first keeps the SDK's write of it from racing the exit.
        sys.stdin.readline()
        error = f"No conversation found with session ID: {args.resume}"
        emit(
            {
                "type": "result",
                "subtype": "error_during_execution",
                "duration_ms": 0,
                "duration_api_ms": 0,
                "is_error": True,
                "num_turns": 0,
                "stop_reason": None,
                "session_id": args.resume,
                "total_cost_usd": 0,
                "usage": {},
                "modelUsage": {},
                "permission_denials": [],
                "uuid": str(uuid.uuid4()),
                "errors": [error],
            }
        )
        sys.stderr.write(error + "\n")
        return 1

    stand_in = StandIn(args, conversation)
    threading.Thread(target=stand_in.read_stdin, args=(state_dir / "stdin.jsonl",), daemon=True).start()
    return stand_in.run()


if __name__ == "__main__":
    sys.exit(main())
