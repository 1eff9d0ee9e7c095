"""Chainlit's ``chainlit.types`` names an app imports for its type hints: ``ThreadDict`` (what
``on_chat_resume`` gets), ``StepDict`` and ``ElementDict`` (its steps and elements), and the
starter and profile classes. ``from chainlit.types import ThreadDict`` becomes
``from sessions_app.chat.types import ThreadDict`` (or ``cl.types.ThreadDict``).

They describe the dicts Tether sends (``threads_app.wire``); the wire has more fields than
listed here at times, so they are not total.
"""

from typing import Any, TypedDict

from sessions_app.chat.profiles import ChatProfile, Starter

__all__ = ["ChatProfile", "ElementDict", "Starter", "StepDict", "ThreadDict"]


class StepDict(TypedDict, total=False):
    id: str
    threadId: str
    parentId: str | None
    name: str
    type: str
    input: str
    output: str
    isError: bool
    createdAt: str
    start: str | None
    end: str | None
    metadata: dict[str, Any]
    showInput: bool | str
    language: str | None


class ElementDict(TypedDict, total=False):
    id: str
    threadId: str | None
    type: str
    name: str
    display: str
    url: str | None
    forId: str | None
    mime: str | None
    size: str | None
    language: str | None
    page: int | None
    props: dict[str, Any]


class ThreadDict(TypedDict, total=False):
    id: str
    createdAt: str
    updatedAt: str
    name: str | None
    userId: str
    userIdentifier: str
    tags: list[str]
    metadata: dict[str, Any]
    steps: list[StepDict]
    elements: list[ElementDict]
