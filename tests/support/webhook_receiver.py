"""A webhook receiver on loopback for the integration tests (it records every delivery and
answers the statuses it is told to, in order), and the box whose webhook points at it."""

import asyncio
import json
import time
from typing import Any

from aiohttp import web
from asgiref.sync import sync_to_async
from django.core.cache import cache

from threads_app.models import Box
from threads_app.services import default_box_for


class Receiver:
    """A webhook receiver on loopback; answers the listed statuses in order, then 200."""

    def __init__(self) -> None:
        self.statuses: list[int] = []
        self.deliveries: list[tuple[float, dict[str, str], bytes]] = []
        self.url = ""
        self._changed = asyncio.Condition()

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.deliveries.append((time.monotonic(), dict(request.headers), body))
        async with self._changed:
            self._changed.notify_all()
        status = self.statuses.pop(0) if self.statuses else 200
        return web.Response(status=status, text="ok" if status < 400 else "no")

    async def wait(self, count: int, timeout: float = 15.0) -> list[tuple[float, dict[str, str], bytes]]:
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: len(self.deliveries) >= count), timeout)
        return self.deliveries

    def payloads(self) -> list[dict[str, Any]]:
        return [json.loads(body) for _, _, body in self.deliveries]

    async def response_of(self, message_id: str, timeout: float = 15.0) -> dict[str, Any]:
        async with self._changed:
            await asyncio.wait_for(
                self._changed.wait_for(lambda: any(p["messageId"] == message_id for p in self.payloads())),
                timeout,
            )
        response: dict[str, Any] = next(p for p in self.payloads() if p["messageId"] == message_id)[
            "response"
        ]
        return response


@sync_to_async
def hooked_box(user: Any, url: str) -> Box:
    """The user's default box (where integration threads open) with its webhook set."""
    box = default_box_for(user)
    box.webhook_url = url
    box.save(update_fields=["webhook_url"])
    # The throttle counts per user id; on a shared cache (Redis) an earlier run's count of
    # the same id could still be there.
    cache.delete(f"throttle_sends_{user.pk}")
    return box
