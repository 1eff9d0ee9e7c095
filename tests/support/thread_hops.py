"""Counting the times a piece of work leaves the event loop for a worker thread.

Every way async code hands a synchronous call to a thread ends in the loop's
``run_in_executor``: asgiref's ``SyncToAsync`` (so Channels' ``database_sync_to_async`` and
``sessions_app.database``'s pooled variant), ``asyncio.to_thread`` and direct calls. Counting
there, on every loop of the process, sees each hop once whichever wrapper made it, and keeps
the name of the function that ran so a failing test can show them.
"""

import asyncio
import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

from asgiref.sync import SyncToAsync

from tests.support.statements import NamedCalls


def hop_name(func: Callable[..., Any]) -> str:
    """The function a hop runs, unwrapped from asgiref's and asyncio's partials."""
    while isinstance(func, functools.partial):
        owner = getattr(func.func, "__self__", None)
        if isinstance(owner, SyncToAsync) and func.func.__name__ == "thread_handler":
            func = func.args[-1]  # thread_handler(loop, exc_info, task_context, func, child)
        elif getattr(func.func, "__name__", "") == "run" and func.args:  # to_thread: ctx.run(f, ...)
            func = func.args[0]
        else:
            func = func.func
    for attribute in ("func", "__wrapped__"):  # database_sync_to_async and its kin keep the target
        func = getattr(func, attribute, func)
    return f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', repr(func))}"


class ThreadHops(NamedCalls):
    """The hops from an event loop to a worker thread made while a block runs, by what each ran."""


@contextlib.contextmanager
def counting_thread_hops() -> Iterator[ThreadHops]:
    """Count every ``run_in_executor`` call (on any asyncio loop) while the block runs."""
    seen = ThreadHops()
    original = asyncio.BaseEventLoop.run_in_executor

    def counted(self: asyncio.BaseEventLoop, executor: Any, func: Callable[..., Any], *args: Any) -> Any:
        seen.add(hop_name(func))
        return original(self, executor, func, *args)

    asyncio.BaseEventLoop.run_in_executor = counted  # type: ignore[method-assign,assignment]
    try:
        yield seen
    finally:
        asyncio.BaseEventLoop.run_in_executor = original  # type: ignore[method-assign]
