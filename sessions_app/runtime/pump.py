"""The one loop that drives a run for both session kinds: engine message in, adapted
message out to the session, and the close handler when the run ends (for any reason)."""

import asyncio
import logging
from collections.abc import Awaitable, Callable

from sessions_app.runtime.engines.base import Run
from sessions_app.runtime.messages import ChatMessage, adapt

logger = logging.getLogger(__name__)


async def pump_run(
    run: Run,
    on_message: Callable[[ChatMessage], Awaitable[None]],
    on_close: Callable[[BaseException | None], Awaitable[None]],
) -> None:
    """Feed every message of ``run`` to ``on_message``; always end with ``on_close``."""
    error: BaseException | None = None
    try:
        async for raw in run.messages():
            for message in adapt(raw):
                await on_message(message)
    except asyncio.CancelledError:
        error = None
        raise
    except Exception as exc:
        logger.exception("engine run failed")
        error = exc
    finally:
        run.closed.set()
        await asyncio.shield(on_close(error))
