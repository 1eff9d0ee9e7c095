"""A python-socketio client that asks for event offsets and keeps what a recovering client
keeps (the last offset it saw), recording every session event with its offset."""

import asyncio
import uuid
from typing import Any

import socketio


class OffsetClient:
    """A python-socketio client that asks for offsets and keeps what a recovering client keeps:
    the last offset it saw; it records every session event with its offset."""

    def __init__(self, url: str, cookie: str) -> None:
        self.url = url
        self.cookie = cookie
        self.session_id = str(uuid.uuid4())
        self.offset: str | None = None
        self.events: list[tuple[str, Any, int | None]] = []  # (event, data, offset)
        self.recoveries: list[dict[str, Any]] = []
        self.sio: socketio.AsyncClient | None = None

    async def connect(self) -> None:
        sio = socketio.AsyncClient(reconnection=False)

        async def record(event: str, *args: Any) -> None:
            if event == "connection_recovery":
                self.recoveries.append(args[0])
                return
            offset = None
            if args and isinstance(args[-1], str) and args[-1].isdigit():
                offset = int(args[-1])
                self.offset = args[-1]
                args = args[:-1]
            self.events.append((event, args[0] if args else None, offset))

        sio.on("*", record)
        recoveries = len(self.recoveries)
        auth: dict[str, Any] = {"sessionId": self.session_id, "offsets": True}
        if self.offset is not None:
            auth["offset"] = self.offset
        self.sio = sio
        await sio.connect(
            self.url,
            headers={"Cookie": self.cookie},
            auth=auth,
            transports=["websocket"],
            socketio_path="/ws/socket.io",
            wait_timeout=10,
        )
        # The server says first whether it replayed what this client missed.
        await self.wait(lambda: len(self.recoveries) > recoveries, timeout=30)
        await sio.emit("connection_successful")

    async def send(self, text: str) -> dict[str, Any]:
        assert self.sio is not None
        answer: dict[str, Any] = await self.sio.call(
            "client_message", {"message": {"id": str(uuid.uuid4()), "output": text}}, timeout=30
        )
        return answer

    async def gone(self) -> None:
        """Wait until the client noticed that its connection is gone."""
        assert self.sio is not None
        for _ in range(200):
            if not self.sio.connected:
                break
            await asyncio.sleep(0.05)
        await self.sio.disconnect()
        await self.sio.shutdown()

    async def close(self) -> None:
        if self.sio is not None:
            await self.sio.disconnect()

    def tokens(self) -> str:
        return "".join(data["token"] for event, data, _ in self.events if event == "stream_token")

    def offsets(self) -> list[int]:
        return [offset for _, _, offset in self.events if offset is not None]

    async def wait(self, predicate: Any, timeout: float = 20) -> None:
        for _ in range(int(timeout / 0.05)):
            if predicate():
                return
            await asyncio.sleep(0.05)
        # The caller prints every event (tests.support.event_evidence), not a tail of them.
        raise TimeoutError(f"timed out after {timeout:g} s ({len(self.events)} events received)")
