"""Engine.IO 4 long-polling driven by hand (aiohttp), each request to the next of several
base URLs in turn: a polling session whose requests land on any process of a cluster."""

import asyncio
import itertools
import json
import time
from collections.abc import Callable
from typing import Any, Self

import aiohttp

SEPARATOR = "\x1e"
Event = tuple[str, Any]


class PollingClient:
    """One polling session: the handshake on the first base URL, then every GET and POST on
    the next one in turn (``urls``). ``events`` are the Socket.IO events received, in order."""

    def __init__(self, urls: list[str], cookie: str | None, *, timeout: float = 60) -> None:
        self._urls = itertools.cycle(urls)
        self.cookie = cookie
        self.timeout = timeout
        self.http: aiohttp.ClientSession | None = None
        self.open: dict[str, Any] = {}
        self.sid = ""
        self.events: list[Event] = []
        self.acks: dict[int, Any] = {}
        self.served_by: list[str] = []  # the base URL of every request, in order
        self.closed = False

    async def __aenter__(self) -> Self:
        self.http = aiohttp.ClientSession(headers={"Cookie": self.cookie} if self.cookie else {})
        status, body = await self._request("GET", handshake=True)
        assert status == 200, (status, body)
        assert body[0] == "0", body
        self.open = json.loads(body[1:])
        self.sid = self.open["sid"]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.http is not None
        await self.http.close()

    def _url(self, base: str, handshake: bool = False) -> str:
        query = "EIO=4&transport=polling" + ("" if handshake else f"&sid={self.sid}")
        return f"{base}/ws/socket.io/?{query}&t={time.monotonic_ns()}"

    async def _request(
        self, method: str, data: str | None = None, handshake: bool = False
    ) -> tuple[int, str]:
        assert self.http is not None
        base = next(self._urls)
        self.served_by.append(base)
        async with self.http.request(
            method, self._url(base, handshake), data=data, timeout=aiohttp.ClientTimeout(total=self.timeout)
        ) as response:
            return response.status, await response.text()

    async def get_raw(self) -> tuple[int, str]:
        return await self._request("GET")

    async def post_packets(self, packets: list[str]) -> None:
        status, body = await self._request("POST", SEPARATOR.join(packets))
        assert (status, body) == (200, "ok"), (status, body)

    async def connect_namespace(self, auth: dict[str, Any]) -> dict[str, Any]:
        """The Socket.IO CONNECT; returns its answer's data."""
        await self.post_packets(["40" + json.dumps(auth)])
        while True:
            for packet in await self.poll():
                if packet.startswith("40"):
                    answer: dict[str, Any] = json.loads(packet[2:])
                    return answer
                if packet.startswith("44"):
                    raise AssertionError(f"connect refused: {packet}")

    async def poll(self) -> list[str]:
        """One GET: its Engine.IO packets (pings answered, events recorded)."""
        status, body = await self.get_raw()
        assert status == 200, (status, body)
        packets = body.split(SEPARATOR)
        pongs = []
        for packet in packets:
            if packet == "2":
                pongs.append("3")
            elif packet == "1":
                self.closed = True
            elif packet.startswith("42"):
                name, *args = json.loads(packet[2:])
                self.events.append((name, args[0] if len(args) == 1 else args))
            elif packet.startswith("43"):
                digits = len(packet) - len(packet[2:].lstrip("0123456789"))
                self.acks[int(packet[2:digits])] = json.loads(packet[digits:])
        if pongs:
            await self.post_packets(pongs)
        return packets

    async def drain(self) -> None:
        """Take what is waiting now (a GET that answers a noop when nothing is)."""
        await self.poll()

    async def events_until(self, done: Callable[[list[Event]], bool], timeout: float = 20) -> list[Event]:
        async with asyncio.timeout(timeout):
            while not done(self.events):
                await self.poll()
        return self.events

    async def emit(self, event: str, data: Any, ack_id: int | None = None) -> None:
        await self.post_packets([f"42{'' if ack_id is None else ack_id}" + json.dumps([event, data])])
