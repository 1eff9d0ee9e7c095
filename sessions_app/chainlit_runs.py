"""The "run" steps Chainlit wraps each ``on_message`` in, as Chainlit's frontend sees them.

Chainlit (``chainlit/callbacks.py``) runs ``on_message`` inside ``Step(name="on_message",
type="run", parent_id=<the user message>)``, so every message the hook sends has the run as
its parent; Chainlit's frontend (``components/chat/Messages``) shows the thumbs only on the
last assistant message of a finished run, and rates the run (``forId`` is the run's id).

Tether stores no run: it would cost every turn a write. Instead, for the sockets of Chainlit's
frontend only (``RunSteps``), the run is drawn on the wire from what the socket shows anyway:
the user message opens a run (sent before the first reply under it), every top-level step
after it is sent as the run's child, and the next user message or ``task_end`` closes it. A
resumed thread's steps are nested the same way (``nest_in_runs``), with the feedback of the
run's last assistant message on the run. A run's id is its user message's id with its bits
flipped by ``RUN_MASK``, so the feedback endpoint finds the message rated from the run's id
(``user_message_of``) without a stored run.
"""

import uuid
from datetime import UTC, datetime
from typing import Any

from sessions_app.event_frames import EncodedEvent, encode_event

RUN_NAME = "on_message"
# Flips a user message's id into its run's (and back); the version and variant bits are kept.
RUN_MASK = 0x5A5A5A5A_5A5A_0A5A_0A5A_5A5A5A5A5A5A
USER_MESSAGE = "user_message"
ASSISTANT_MESSAGE = "assistant_message"
# The events whose step may be placed in a run (the others pass as they are, undecoded).
STEP_EVENTS = frozenset({"new_message", "update_message", "stream_start"})


def run_id_for(user_message_id: str) -> str:
    return str(uuid.UUID(int=uuid.UUID(user_message_id).int ^ RUN_MASK))


def user_message_of(run_id: uuid.UUID) -> uuid.UUID:
    """The user message whose run ``run_id`` would be (``run_id_for`` undone)."""
    return uuid.UUID(int=run_id.int ^ RUN_MASK)


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def run_step(user_message: dict[str, Any], *, end: str | None) -> dict[str, Any]:
    """The run step of ``user_message`` in Chainlit's StepDict shape."""
    start = user_message.get("createdAt") or _now()
    return {
        "name": RUN_NAME,
        "type": "run",
        "id": run_id_for(user_message["id"]),
        "threadId": user_message.get("threadId"),
        "parentId": user_message["id"],
        "streaming": False,
        "metadata": {},
        "tags": None,
        "input": "",
        "isError": False,
        "output": "",
        "createdAt": start,
        "start": start,
        "end": end,
        "language": None,
        "defaultOpen": False,
        "autoCollapse": False,
        "showInput": False,
        "generation": None,
    }


def _is_user_message(step: Any) -> bool:
    return isinstance(step, dict) and step.get("type") == USER_MESSAGE and not step.get("parentId")


def nest_in_runs(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A thread's steps (in ``seq`` order) with a finished run after each user message, the
    top-level steps after it as the run's children, and the feedback of the run's last
    assistant message on the run (where Chainlit's frontend reads it)."""
    nested: list[dict[str, Any]] = []
    run: dict[str, Any] | None = None
    for step in steps:
        if _is_user_message(step):
            run = run_step(step, end=step.get("createdAt") or _now())
            nested += [step, run]
            continue
        if run is not None and not step.get("parentId"):
            step = {**step, "parentId": run["id"]}
            if step.get("type") == ASSISTANT_MESSAGE:
                if step.get("feedback"):
                    run["feedback"] = step["feedback"]
                else:
                    run.pop("feedback", None)
        nested.append(step)
    return nested


class RunSteps:
    """One socket's runs: what it was shown, rewritten as Chainlit's server would send it."""

    def __init__(self) -> None:
        self.user_message: dict[str, Any] | None = None  # the last user message shown
        self.open_run: dict[str, Any] | None = None  # the run its replies go under, once sent
        self.shown_run: str | None = None  # the id of the last run sent (open or closed)

    def rewrite(self, encoded: EncodedEvent) -> list[EncodedEvent]:
        """The events to send for ``encoded`` (itself, changed or not, and runs opened or
        closed around it)."""
        if encoded.event == "task_end":
            return [*self._close(), encoded]
        if encoded.event == "resume_thread":
            return [self._resumed(encoded)]
        if encoded.event == "ask":
            return self._ask(encoded)
        if encoded.event not in STEP_EVENTS:
            return [encoded]
        args = encoded.args
        step = args[0] if args else None
        if not isinstance(step, dict) or not step.get("id"):
            return [encoded]
        if _is_user_message(step):
            if self.user_message is not None and self.user_message.get("id") == step["id"]:
                return [encoded]  # the same message again (shown as written)
            closed = self._close()
            self.user_message = step
            return [*closed, encoded]
        if step.get("parentId") or self.user_message is None:
            return [encoded]
        opened = self._open()
        assert self.open_run is not None
        placed = {**step, "parentId": self.open_run["id"]}
        return [*opened, encode_event(encoded.event, [placed, *args[1:]])]

    def _ask(self, encoded: EncodedEvent) -> list[EncodedEvent]:
        """An ask's question (``{msg, spec}``) is a message of the run, as a step sent is."""
        args = encoded.args
        payload = args[0] if args else None
        if not isinstance(payload, dict):
            return [encoded]
        question = payload.get("msg")
        if not isinstance(question, dict) or question.get("parentId") or self.user_message is None:
            return [encoded]
        opened = self._open()
        assert self.open_run is not None
        placed = {**payload, "msg": {**question, "parentId": self.open_run["id"]}}
        return [*opened, encode_event("ask", [placed, *args[1:]])]

    def _open(self) -> list[EncodedEvent]:
        """Open the user message's run; sent once (a message after its ``task_end``, such as
        Chainlit's note for a stopped task, goes under the run already shown, reopened)."""
        if self.open_run is not None or self.user_message is None:
            return []
        self.open_run = run_step(self.user_message, end=None)
        if self.shown_run == self.open_run["id"]:
            return []
        self.shown_run = self.open_run["id"]
        self.open_run["start"] = _now()
        return [encode_event("new_message", [self.open_run])]

    def _close(self) -> list[EncodedEvent]:
        run, self.open_run = self.open_run, None
        if run is None:
            return []
        return [encode_event("update_message", [{**run, "end": _now()}])]

    def _resumed(self, encoded: EncodedEvent) -> EncodedEvent:
        args = encoded.args
        thread = args[0] if args else None
        if not isinstance(thread, dict) or not isinstance(thread.get("steps"), list):
            return encoded
        self.open_run = None
        users = [s for s in thread["steps"] if _is_user_message(s)]
        self.user_message = users[-1] if users else None
        if self.user_message is not None:
            # Replies still to come in the resumed turn go under its (finished) run.
            self.open_run = run_step(self.user_message, end=None)
            self.shown_run = self.open_run["id"]
        return encode_event("resume_thread", [{**thread, "steps": nest_in_runs(thread["steps"])}, *args[1:]])
