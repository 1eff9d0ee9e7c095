"""A small HTTP server on loopback inside the test's event loop (a webhook receiver)."""

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from aiohttp import web


@asynccontextmanager
async def serving(
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]], path: str = "/hook"
) -> AsyncIterator[int]:
    """Serve POSTs to ``path`` with ``handler`` on 127.0.0.1; yields the port. The server
    runs on the test's own loop, so the handler sees exactly what the app under test sent."""
    app = web.Application()
    app.router.add_post(path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield runner.addresses[0][1]
    finally:
        await runner.cleanup()
