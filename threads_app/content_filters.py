"""The hook through which another app decides what transcript reads show of stored content.

A step's ``content`` (and a send's ``images``) is stored as the blocks arrived, photos inline.
threads_app imports no other app, so it does not know what a photo is: an app that does
registers a ``ContentFilter`` here (``media_app`` in its ``AppConfig.ready``). Every transcript
read (``selectors``: history, bootstrap, the ThreadDict of ``resume_thread``) then selects
``column(name)``, the column as the filter wants it fetched, instead of the column itself, and
shows ``from_text(...)`` of it; dictionaries made from a model instance (``wire.step_to_dict``,
what the live path emits) show ``from_blocks(...)``. With no filter, reads return the stored
blocks unchanged.
"""

from typing import Any, Protocol

from django.db.models import Expression


class ContentFilter(Protocol):
    def column(self, name: str) -> Expression:
        """An expression selecting the JSON column ``name`` as text, however it likes."""
        ...

    def from_text(self, thread_id: Any, entry_id: Any, text: str | None) -> list[dict[str, Any]]:
        """The blocks to show, from what ``column`` selected for one row."""
        ...

    def from_blocks(self, thread_id: Any, entry_id: Any, blocks: Any) -> Any:
        """The blocks to show, from blocks already in memory."""
        ...


_active: ContentFilter | None = None


def register(content_filter: ContentFilter | None) -> None:
    """Install the filter (``None`` removes it)."""
    global _active
    _active = content_filter


def active() -> ContentFilter | None:
    return _active


def show_blocks(thread_id: Any, entry_id: Any, blocks: Any) -> Any:
    return blocks if _active is None else _active.from_blocks(thread_id, entry_id, blocks)
