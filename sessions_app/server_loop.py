"""Running the runtime's coroutines from Django's sync views."""

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from asgiref.sync import async_to_sync
from django.db import connection

from chatproject import tracing

T = TypeVar("T")


def run_on_server_loop(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a runtime coroutine from a sync view, on the server's event loop, in a fresh context.

    A coroutine called through plain ``async_to_sync`` inherits the request thread's executor;
    tasks it starts (engine runs, heartbeats, the mailbox reader) outlive the request, and
    their database calls would go to that executor after it has shut down. A fresh context
    gives them the loop's own executor, like everything the consumers start (it holds the
    request's span only, when traces are on). The request's
    own connection goes back to the pool first rather than being held while waiting.
    """
    connection.close()
    context = tracing.fresh_context()  # the request's span stays the parent of what it runs

    async def detached() -> T:
        return await asyncio.get_running_loop().create_task(coroutine, context=context)

    return async_to_sync(detached)()
