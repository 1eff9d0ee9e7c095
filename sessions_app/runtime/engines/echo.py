"""The embedded default engine: drives ``echo_process`` as a subprocess over JSON lines."""

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from django.conf import settings

from sessions_app.runtime.engines.base import EngineError, UserTurn
from sessions_app.runtime.engines.options import Option, at_least, not_blank

# Lines carry whole messages; a user turn with photos is megabytes long.
LINE_LIMIT = 64 * 1024 * 1024
# Run as a script, not with ``-m``: a module run imports its packages first (this runtime's
# registry and asyncio), 60 ms of CPU at every start for nothing the process uses; a burst
# of starts (a user opening 32 threads) took the CPU others' turns needed.
ECHO_PROCESS = Path(__file__).with_name("echo_process.py")
CLOSE_GRACE = 5.0
READ_CHUNK = 256 * 1024


def rewind_state(state_dir: Path, conversation_id: str, turns_kept: int) -> None:
    """Write the conversation's state file as ``echo_process.Conversation.save`` does."""
    path = state_dir / f"{Path(conversation_id).name}.json"
    if not path.exists():
        return  # a conversation that never answered a turn has nothing to forget
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"turns": turns_kept}))
    tmp.replace(path)


class EchoEngine:
    OPTIONS = {
        "slow": Option("number", check=at_least(0)),  # seconds between streamed words
        "coalesce": Option("boolean"),  # merge stream deltas already waiting in the pipe
        "state_dir": Option("string", check=not_blank),  # default: ECHO_STATE_DIR
    }

    def __init__(self, options: dict[str, Any]) -> None:
        # A box's own ``slow`` wins over the process's demo pace (``ECHO_DEMO_PACE``).
        self.slow = float(options.get("slow", settings.ECHO_DEMO_PACE))
        self.coalesce = bool(options.get("coalesce", True))
        self.state_dir = Path(options.get("state_dir") or settings.ECHO_STATE_DIR)

    async def rewind(self, conversation_id: str, turns_kept: int) -> None:
        """Count the conversation's turns from ``turns_kept`` again (``base.Rewinds``): the
        state file ``echo_process`` keeps per conversation holds nothing else."""
        await asyncio.to_thread(rewind_state, self.state_dir, conversation_id, turns_kept)

    async def start(self, *, resume: str | None = None) -> "EchoRun":
        args = [sys.executable, str(ECHO_PROCESS), "--state-dir", str(self.state_dir)]
        if self.slow:
            args += ["--slow", str(self.slow)]
        if resume:
            args += ["--resume", resume]
        try:
            process = await asyncio.create_subprocess_exec(
                *args,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                cwd=settings.BASE_DIR,
                limit=LINE_LIMIT,
            )
        except OSError as exc:
            raise EngineError(f"could not start the echo engine: {exc}") from exc
        return EchoRun(process, coalesce=self.coalesce)


class EchoRun:
    """One echo subprocess. ``closed`` is set once the process has exited."""

    def __init__(self, process: asyncio.subprocess.Process, *, coalesce: bool = True) -> None:
        self.process = process
        self.coalesce = coalesce
        self.closed = asyncio.Event()
        self._watcher = asyncio.create_task(self._watch())

    @property
    def pid(self) -> int:
        return self.process.pid

    async def _watch(self) -> None:
        await self.process.wait()
        self.closed.set()

    async def _write(self, message: dict[str, Any]) -> None:
        stdin = self.process.stdin
        if stdin is None or stdin.is_closing() or self.closed.is_set():
            raise EngineError("the echo engine is not running")
        stdin.write((json.dumps(message) + "\n").encode())
        try:
            await stdin.drain()
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise EngineError("the echo engine went away") from exc

    async def send(self, turn: UserTurn) -> None:
        await self._write({"type": "user", "content": turn.content_blocks()})

    async def messages(self) -> AsyncIterator[dict[str, Any]]:
        """The engine's messages in order. Stream deltas of one message that are already
        waiting in the pipe when the server gets to them are merged into one: a server that
        keeps up sees every delta, one that falls behind catches up in bigger pieces, and the
        text is the same either way."""
        stdout = self.process.stdout
        assert stdout is not None
        buffered = b""
        while chunk := await stdout.read(READ_CHUNK):
            lines = (buffered + chunk).split(b"\n")
            buffered = lines.pop()
            pending: dict[str, Any] | None = None
            for line in lines:
                if not line.strip():
                    continue
                message = json.loads(line)
                if (
                    self.coalesce
                    and pending is not None
                    and message.get("type") == "stream_event"
                    and message.get("message_id") == pending["message_id"]
                ):
                    pending = {**pending, "delta": pending["delta"] + message["delta"]}
                    continue
                if pending is not None:
                    yield pending
                    pending = None
                if message.get("type") == "stream_event":
                    pending = message
                else:
                    yield message
            if pending is not None:
                yield pending
        if buffered.strip():
            yield json.loads(buffered)
        await self.process.wait()

    async def interrupt(self) -> None:
        with contextlib.suppress(EngineError):
            await self._write({"type": "interrupt"})

    async def close(self) -> None:
        if self.process.stdin is not None and not self.process.stdin.is_closing():
            self.process.stdin.close()
        try:
            await asyncio.wait_for(self.process.wait(), CLOSE_GRACE)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()
        self.closed.set()
