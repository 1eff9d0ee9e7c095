"""The hook through which another app lists the files attached to a thread's steps.

threads_app imports no other app, so it does not know where elements (images, files, PDFs,
texts, plots an app attached to a message) are kept: ``media_app`` registers a provider here in
its ``AppConfig.ready``. The thread reads that show a transcript (``resume_thread``'s
ThreadDict, bootstrap, a history page) then carry ``elements``: Chainlit's ElementDicts,
oldest first. With no provider they are empty.
"""

from collections.abc import Callable
from typing import Any

# (thread id, step ids or None for all) -> ElementDicts
Provider = Callable[[Any, list[Any] | None], list[dict[str, Any]]]

_provider: Provider | None = None


def register(provider: Provider | None) -> None:
    """Install the provider (``None`` removes it)."""
    global _provider
    _provider = provider


def elements_of(thread_id: Any, step_ids: list[Any] | None = None) -> list[dict[str, Any]]:
    """The thread's elements (only those attached to ``step_ids`` when given)."""
    if _provider is None or step_ids == []:
        return []
    return _provider(thread_id, step_ids)
