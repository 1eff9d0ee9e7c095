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

# Lines carry whole messages; a user turn with photos is megabytes long.
LINE_LIMIT = 64 * 1024 * 1024
CLOSE_GRACE = 5.0


class EchoEngine:
    def __init__(self, options: dict[str, Any]) -> None:
        self.slow = float(options.get("slow", 0.0))
        self.state_dir = Path(options.get("state_dir") or settings.ECHO_STATE_DIR)

    async def start(self, *, resume: str | None = None) -> "EchoRun":
        args = [
            sys.executable,
            "-m",
            "sessions_app.runtime.engines.echo_process",
            "--state-dir",
            str(self.state_dir),
        ]
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
        return EchoRun(process)


class EchoRun:
    """One echo subprocess. ``closed`` is set once the process has exited."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
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
        assert self.process.stdout is not None
        while line := await self.process.stdout.readline():
            yield json.loads(line)
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
