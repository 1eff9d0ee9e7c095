"""This process's mailbox: one channel on the channel layer, read by one task.

Other processes reach work that lives here through it: stopping a turn this process runs,
handing a message to the box runtime this process owns. ``request`` sends a message and waits
for the answer, which comes back to the sender's own mailbox. A request or answer that spent
over ``SLOW_REQUEST`` on the way, or a handler that took as long, is logged with its times: a
process falling behind its inbox shows there before its requests time out.
"""

import asyncio
import contextvars
import itertools
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, cast

from channels.layers import BaseChannelLayer, get_channel_layer
from django.conf import settings

from chatproject import tracing
from sessions_app.database import database_sync_to_async
from sessions_app.processes import heartbeat, is_alive

logger = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], Awaitable[Any]]
REPLY = "mailbox.reply"
# A request that took longer than this to arrive, or to be handled, is logged with its times.
SLOW_REQUEST = 2.0


class MailboxError(RuntimeError):
    """The other process did not answer, or answered with an error."""


class Mailbox:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready: asyncio.Future[str] | None = None
        self._handlers: dict[str, Handler] = {}
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._ids = itertools.count(1)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._on_start: list[Callable[[str], None]] = []

    def register(self, kind: str, handler: Handler) -> None:
        """Handle messages of ``type == kind``; a request gets the handler's return value."""
        with self._lock:
            self._handlers[kind] = handler

    async def channel(self) -> str:
        """This process's channel name (the reader starts on first use, per event loop)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._loop is not loop:
                self._loop, self._ready = loop, loop.create_future()
                starting = True
            else:
                starting = False
            ready = self._ready
        assert ready is not None
        if starting:
            try:
                name = await cast(BaseChannelLayer, get_channel_layer()).new_channel()
                # The liveness row exists before this address can be named by any claim.
                await database_sync_to_async(heartbeat.register)(name)
            except BaseException as exc:
                # Not started: whoever waits for it hears why, and the next use tries again.
                with self._lock:
                    if self._ready is ready:
                        self._loop, self._ready = None, None
                ready.set_exception(exc)
                ready.exception()  # retrieved here: waiting callers may be none
                raise
            # The reader and the loops started with it outlive whatever started the mailbox:
            # they run in a fresh context (not in the trace of a first send, say).
            self._keep(loop.create_task(self._read(name), context=contextvars.Context()))
            ready.set_result(name)
            with self._lock:
                started = list(self._on_start)
            for callback in started:
                contextvars.Context().run(callback, name)
        return await ready

    def reset(self) -> None:
        """Forget the channel and what awaits answers (tests); handlers stay registered."""
        with self._lock:
            self._loop, self._ready = None, None
            self._waiting.clear()
        for task in list(self._tasks):
            task.cancel()

    def on_start(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(address)`` when the mailbox starts (in the event loop): the
        process-wide loops (recovery, expiry) start with it."""
        with self._lock:
            self._on_start.append(callback)

    @property
    def address(self) -> str:
        """This process's address if the mailbox has started, else ''."""
        ready = self._ready
        return ready.result() if ready is not None and ready.done() and not ready.cancelled() else ""

    def _keep(self, task: asyncio.Task[Any]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        await cast(BaseChannelLayer, get_channel_layer()).send(channel, message)

    async def request(self, channel: str, message: dict[str, Any], timeout: float = 10.0) -> Any:
        reply_to = await self.channel()
        request_id = next(self._ids)
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        with self._lock:
            self._waiting[request_id] = answer
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            try:
                # The request carries the sender's trace (``traceparent``) when traces are on.
                request = tracing.inject(
                    {**message, "reply_to": reply_to, "request_id": request_id, "sent_at": time.time()}
                )
                await self.send(channel, request)
            except Exception as exc:  # the channel layer is down or its connection went stale
                raise MailboxError(f"could not send {message['type']}: {exc!r}") from exc
            # Wait for the answer, but not for a process that died meanwhile: its liveness is
            # checked between short waits, so a dead owner is noticed in about a heartbeat.
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise MailboxError(f"no answer to {message['type']} within {timeout}s")
                try:
                    return await asyncio.wait_for(
                        asyncio.shield(answer), min(remaining, settings.PROCESS_HEARTBEAT_EVERY)
                    )
                except TimeoutError:
                    if not await database_sync_to_async(is_alive)(channel):
                        raise MailboxError(f"{channel} died before answering {message['type']}") from None
        finally:
            with self._lock:
                self._waiting.pop(request_id, None)

    async def _read(self, name: str) -> None:
        layer = cast(BaseChannelLayer, get_channel_layer())
        while True:
            try:
                message = await layer.receive(name)
            except asyncio.CancelledError:
                return
            except Exception:
                logger.exception("mailbox receive failed")
                await asyncio.sleep(1)
                continue
            self._keep(asyncio.get_running_loop().create_task(self._dispatch(message)))

    async def _dispatch(self, message: dict[str, Any]) -> None:
        kind = message.get("type", "")
        if kind == REPLY:
            if (sent_at := message.get("sent_at")) is not None and time.time() - sent_at > SLOW_REQUEST:
                logger.warning("mailbox: an answer arrived %.1f s after it was sent", time.time() - sent_at)
            with self._lock:
                waiting = self._waiting.get(message["request_id"])
            if waiting is not None and not waiting.done():
                if "error" in message:
                    waiting.set_exception(MailboxError(message["error"]))
                else:
                    waiting.set_result(message.get("result"))
            return
        with self._lock:
            handler = self._handlers.get(kind)
        arrived = time.time()
        reply = {"type": REPLY, "request_id": message.get("request_id")}
        if handler is None:
            logger.warning("mailbox: no handler for %r", kind)
            reply["error"] = f"no handler for {kind}"
        else:
            try:
                # In the sender's trace; none if the sender's work was not traced.
                with tracing.continued(message, f"mailbox {kind}", {"tether.mailbox.type": kind}):
                    reply["result"] = await handler(message)
            except Exception as exc:
                logger.exception("mailbox handler for %r failed", kind)
                reply["error"] = f"{type(exc).__name__}: {exc}"
        handled = time.time()
        if (sent_at := message.get("sent_at")) is not None and (
            arrived - sent_at > SLOW_REQUEST or handled - arrived > SLOW_REQUEST
        ):
            logger.warning(
                "mailbox: %s arrived %.1f s after it was sent and took %.1f s to handle",
                kind,
                arrived - sent_at,
                handled - arrived,
            )
        if message.get("reply_to"):
            reply["sent_at"] = handled
            await self.send(message["reply_to"], reply)


mailbox = Mailbox()
