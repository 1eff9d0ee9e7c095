"""The echo engine's process: JSON lines in on stdin, JSON lines out on stdout.

A real subprocess, so the runtime is exercised the way it drives a real agent CLI: it starts,
reports its conversation id (resuming the one it is given), streams each reply word by word,
ends every turn with a ``result``, and obeys directives for tests, one per line at the start
of a message:

- ``!slow SECONDS``: wait that long before each token (the box option ``slow`` sets a default);
  words after a directive on its line are part of the message;
- ``!fail``: end the turn with an error result;
- ``!crash``: exit abruptly after the first token;
- ``!tool``: call a (pretend) tool first, reporting the call and its result.

Replies read ``Echo #N: <text>`` where N counts this conversation's turns; the count is kept
per conversation id in a state directory, so a resumed conversation carries on counting.

Input lines: ``{"type": "user", "content": [blocks]}`` and ``{"type": "interrupt"}``.
"""

import argparse
import json
import os
import queue
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any


def emit(*messages: dict[str, Any]) -> None:
    """Write ``messages`` as lines in one write: a reply and its turn's result reach the server
    together, as one read, so it records them in one database trip (``ChatSession``)."""
    sys.stdout.write("".join(json.dumps(message) + "\n" for message in messages))
    sys.stdout.flush()


class Conversation:
    def __init__(self, state_dir: Path, session_id: str) -> None:
        self.path = state_dir / f"{session_id}.json"
        self.session_id = session_id
        self.turns = json.loads(self.path.read_text())["turns"] if self.path.exists() else 0

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"turns": self.turns}))
        tmp.replace(self.path)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def parse(content: list[dict[str, Any]], default_slow: float) -> tuple[str, int, dict[str, Any]]:
    text = "\n\n".join(block.get("text", "") for block in content if block.get("type") == "text")
    images = sum(1 for block in content if block.get("type") == "image")
    directives: dict[str, Any] = {"slow": default_slow}
    lines = []
    for line in text.splitlines():
        word = line.strip().split(" ")
        # The words after a directive on its line are the message's ("!slow 0.2 hello").
        if word[0] == "!slow" and len(word) > 1 and _is_number(word[1]):
            directives["slow"] = float(word[1])
            rest = word[2:]
        elif word[0] in ("!fail", "!crash", "!tool"):
            directives[word[0][1:]] = True
            rest = word[1:]
        else:
            lines.append(line)
            continue
        if " ".join(rest).strip():
            lines.append(" ".join(rest))
    return "\n".join(lines).strip(), images, directives


def answer(
    conversation: Conversation, content: list[dict[str, Any]], interrupts: "queue.Queue[bool]", slow: float
) -> None:
    text, images, directives = parse(content, slow)
    conversation.turns += 1
    conversation.save()
    message_id = str(uuid.uuid4())
    if directives.get("tool"):
        tool_id = f"tool-{uuid.uuid4().hex[:8]}"
        emit(
            {
                "type": "assistant",
                "message_id": str(uuid.uuid4()),
                "content": [
                    {"type": "tool_use", "id": tool_id, "name": "echo_tool", "input": {"text": text}}
                ],
            }
        )
        emit(
            {
                "type": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": tool_id,
                        "content": text.upper(),
                        "is_error": False,
                    }
                ],
            }
        )
    reply = f"Echo #{conversation.turns}: {text}"
    if images:
        reply += f" [{images} image{'s' if images != 1 else ''} received]"
    words = reply.split(" ")
    for index, word in enumerate(words):
        if directives["slow"]:
            time.sleep(directives["slow"])
        if not interrupts.empty():
            interrupts.get()
            emit(
                {
                    "type": "result",
                    "subtype": "interrupted",
                    "session_id": conversation.session_id,
                    "is_error": False,
                    "result": None,
                    "num_turns": 1,
                }
            )
            return
        emit({"type": "stream_event", "message_id": message_id, "delta": word if index == 0 else " " + word})
        if directives.get("crash"):
            os._exit(3)
    if directives.get("fail"):
        emit(
            {
                "type": "result",
                "subtype": "error",
                "session_id": conversation.session_id,
                "is_error": True,
                "result": "echo was told to fail",
                "num_turns": 1,
            }
        )
        return
    emit(
        {"type": "assistant", "message_id": message_id, "content": [{"type": "text", "text": reply}]},
        {
            "type": "result",
            "subtype": "success",
            "session_id": conversation.session_id,
            "is_error": False,
            "result": reply,
            "num_turns": 1,
        },
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--resume", default=None)
    parser.add_argument("--slow", type=float, default=0.0)
    parser.add_argument("--state-dir", default=os.environ.get("ECHO_STATE_DIR", "var/echo"))
    args = parser.parse_args()

    conversation = Conversation(Path(args.state_dir), args.resume or str(uuid.uuid4()))
    emit({"type": "system", "subtype": "init", "session_id": conversation.session_id})

    turns: queue.Queue[dict[str, Any] | None] = queue.Queue()
    interrupts: queue.Queue[bool] = queue.Queue()

    def read_stdin() -> None:
        for line in sys.stdin:
            if not line.strip():
                continue
            message = json.loads(line)
            if message.get("type") == "interrupt":
                interrupts.put(True)
            else:
                turns.put(message)
        turns.put(None)

    threading.Thread(target=read_stdin, daemon=True).start()
    while (message := turns.get()) is not None:
        while not interrupts.empty():  # an interrupt with no turn in flight is moot
            interrupts.get()
        answer(conversation, message.get("content", []), interrupts, args.slow)


if __name__ == "__main__":
    main()
