"""Synchronous app code next to the async server: ``chat.make_async``, ``chat.run_sync``,
``chat.sleep``, and the adapter that lets a hook be a plain ``def``.

Chainlit apps often write hooks as plain functions and call blocking libraries from them. A
plain function run on the event loop would hold up every session of the process, so Tether
runs it on a thread of its own pool (``CHAT_APP_THREADS``), in a copy of the hook's context
(the current session, the open steps). From such a thread ``run_sync`` hands a coroutine back
to the event loop and waits for its result, as Chainlit's does.

A stop cancels the hook's task at once, but Python cannot stop a thread: a plain hook that is
running goes on until it returns (what it sends after the stop still reaches the session).
"""

import asyncio
import contextvars
import functools
import inspect
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from sessions_app.thread_pools import LazyThreadPool

P = ParamSpec("P")
R = TypeVar("R")

# The event loop the app's threads hand coroutines back to (set as a thread is entered).
_hook_loop: contextvars.ContextVar[asyncio.AbstractEventLoop | None] = contextvars.ContextVar(
    "tether_hook_loop", default=None
)


# The process's threads for the app's synchronous code.
app_threads = LazyThreadPool("CHAT_APP_THREADS", "chat-app")


async def in_app_thread(func: Callable[..., R], *args: Any, **kwargs: Any) -> R:
    """Run ``func`` on an app thread, in a copy of the caller's context, and await its result."""
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    context.run(_hook_loop.set, loop)
    call = functools.partial(context.run, func, *args, **kwargs)
    return await loop.run_in_executor(app_threads.get(), call)


def hook_loop() -> asyncio.AbstractEventLoop:
    """The event loop hooks run on, from the loop itself or from an app thread."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        loop = _hook_loop.get()
        if loop is None:
            raise RuntimeError("no chat event loop here: call this from a hook or an app thread") from None
        return loop


def make_async(func: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """``chat.make_async(blocking)(...)``: an awaitable call of a blocking function that runs it
    on an app thread, so the event loop goes on serving everyone else."""

    @functools.wraps(func)
    async def call(*args: P.args, **kwargs: P.kwargs) -> R:
        return await in_app_thread(func, *args, **kwargs)

    return call


def run_sync(coroutine: Coroutine[Any, Any, R]) -> R:
    """``chat.run_sync(chat.Message("hi").send())`` from a plain hook or a ``make_async``
    function: run the coroutine on the event loop, in this thread's context, and wait for it.

    On the event loop itself it would wait for itself: that is refused (await it instead).
    Outside the server (a script, a test) it runs the coroutine on a loop of its own."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        coroutine.close()
        raise RuntimeError("chat.run_sync was called on the event loop: await the coroutine instead")
    loop = _hook_loop.get()
    if loop is None or loop.is_closed():
        return asyncio.run(coroutine)
    # call_soon_threadsafe copies this thread's context into the task it starts.
    return asyncio.run_coroutine_threadsafe(coroutine, loop).result()


def sleep(seconds: float) -> Awaitable[None]:
    """``await chat.sleep(2)``: Chainlit's name for ``asyncio.sleep``."""
    return asyncio.sleep(seconds)


def positional_capacity(func: Callable[..., Any]) -> int | None:
    """How many positional arguments ``func`` takes (None: any number, or unknown)."""
    try:
        parameters = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_POSITIONAL for p in parameters):
        return None
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in parameters)


def as_hook(func: Callable[..., Any], arguments: int | None) -> Callable[..., Awaitable[Any]]:
    """The hook Tether awaits for an app's function: an ``async def`` taking the hook's
    ``arguments`` as it is; a plain ``def`` runs on an app thread (its result awaited too when
    it is awaitable); a function taking fewer positional arguments gets the first ones, as
    Chainlit passes them (``async def on_message():`` is allowed). ``arguments`` None: the
    caller fits the arguments itself."""
    capacity = positional_capacity(func)
    trim = arguments is not None and capacity is not None and capacity < arguments
    if inspect.iscoroutinefunction(func) and not trim:
        return func  # the usual hook costs nothing more per call

    @functools.wraps(func)
    async def hook(*args: Any) -> Any:
        if trim:
            args = args[:capacity]
        if inspect.iscoroutinefunction(func):
            return await func(*args)
        result = await in_app_thread(func, *args)
        if inspect.isawaitable(result):
            return await result
        return result

    return hook
