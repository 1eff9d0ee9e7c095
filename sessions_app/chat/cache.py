"""``@chat.cache``: Chainlit's memo of a function's results in this process, for what is
costly to build and the same for every session (a model, an index, a client).

The key is the arguments (they must be hashable). The first call of a key computes it while
later callers of the same function wait, so a costly value is built once even when several
sessions start together. Nothing is evicted: cache what is small in number.
"""

import functools
import inspect
import threading
from collections.abc import Callable, Hashable
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


def cache(func: Callable[P, R]) -> Callable[P, R]:
    """Cache a plain function's results by its arguments, for the life of the process."""
    if inspect.iscoroutinefunction(func):
        raise TypeError(
            f"@chat.cache takes a plain function; {func.__name__} is async "
            "(a coroutine can be awaited once: cache what it builds instead)"
        )
    results: dict[Hashable, Any] = {}
    lock = threading.Lock()

    @functools.wraps(func)
    def cached(*args: P.args, **kwargs: P.kwargs) -> R:
        key = (args, tuple(sorted(kwargs.items())))
        with lock:
            if key not in results:
                results[key] = func(*args, **kwargs)
            value: R = results[key]
        return value

    return cached
