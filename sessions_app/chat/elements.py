"""``chat.Image``, ``chat.File``, ``chat.Pdf``, ``chat.Text``, ``chat.Plotly``: files an app
attaches to a message or step (Chainlit's elements), and the files a user's message carries.

An element's bytes come from ``content`` (bytes, or text encoded as UTF-8), a ``path`` read
when it is sent, or nothing at all with ``url`` (the page links to it). ``send(for_id=...)``
stores the bytes through the elements storage (media_app), writes the record and emits
``element`` (Chainlit's ElementDict); ``remove()`` deletes both and emits ``remove_element``.
``chat.Message(content, elements=[...])`` sends its elements after itself, attached to it.
"""

import asyncio
import functools
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Literal

from media_app import elements as element_service
from media_app.models import Element as ElementRecord
from sessions_app.chat.context import require_session, turn_message, turn_message_shown_as
from sessions_app.database import database_sync_to_async
from sessions_app.thread_bus import publish_on_thread

Display = Literal["inline", "side", "page"]


class Element:
    """What every element type shares; use one of the subclasses."""

    type: ClassVar[str] = "file"
    _content: bytes | str | None
    # A user's stored file, read when ``content`` is first used (``from_record``).
    _read_stored: Callable[[], bytes] | None

    def __init__(
        self,
        name: str = "",
        *,
        display: Display = "inline",
        path: str | Path | None = None,
        content: bytes | str | None = None,
        url: str | None = None,
        mime: str | None = None,
        for_id: uuid.UUID | str | None = None,
        id: uuid.UUID | str | None = None,
        props: dict[str, Any] | None = None,
    ) -> None:
        if display not in ("inline", "side", "page"):
            raise ValueError(f"display must be 'inline', 'side' or 'page', not {display!r}")
        if path is None and content is None and not url:
            raise ValueError(f"{type(self).__name__} needs path=, content= or url=")
        self.id = uuid.UUID(str(id)) if id else uuid.uuid4()
        self.name = name or (Path(path).name if path else "") or self.type
        self.display: Display = display
        self.path = str(path) if path is not None else None
        self._read_stored: Callable[[], bytes] | None = None
        self.content = content
        self.url = url
        self.mime = mime
        self.for_id = uuid.UUID(str(for_id)) if for_id else None
        self.thread_id: uuid.UUID | None = None
        self.props = props or {}
        self.size_bytes: int | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, display={self.display!r})"

    @property
    def content(self) -> bytes | str | None:
        """The element's bytes or text. A user's file (``message.elements``) is read from the
        storage the first time this is used, not when the message arrives, so an app that
        reads ``path`` (or nothing) never holds the file in memory."""
        if self._content is None and self._read_stored is not None:
            self._content, self._read_stored = self._read_stored(), None
        return self._content

    @content.setter
    def content(self, value: bytes | str | None) -> None:
        self._content = value

    def record_fields(self) -> dict[str, Any]:
        """Chainlit's per-type fields, as the record keeps them; subclasses add theirs."""
        return {}

    async def read_content(self) -> bytes | None:
        """The bytes to store: ``content`` (text as UTF-8), else the file at ``path``; None
        for an element given by ``url``."""
        if self._content is None and self._read_stored is not None:
            return await asyncio.to_thread(self._read_stored)  # a user's file: not kept here
        if self.content is not None:
            return self.content.encode() if isinstance(self.content, str) else bytes(self.content)
        if self.path is not None:
            return await asyncio.to_thread(Path(self.path).read_bytes)
        return None

    async def send(self, for_id: uuid.UUID | str | None = None) -> "Element":
        """Store the element, attached to the message or step ``for_id`` (or the one given at
        construction), and show it."""
        session = require_session()
        if for_id:
            self.for_id = uuid.UUID(str(for_id))
        await session.flush_reply()  # the message it belongs to is written first
        data = await self.read_content()
        self.thread_id = session.thread_id
        record = await database_sync_to_async(element_service.create_element)(
            owner_id=session.user.pk,
            thread_id=session.thread_id,
            element_id=self.id,
            type=self.type,
            name=self.name,
            display=self.display,
            for_id=self.for_id,
            data=data,
            url=self.url or "",
            mime=self.mime,
            props=self.props,
            **self.record_fields(),
        )
        self.mime = record.mime
        self.size_bytes = record.size
        payload = _shown(element_service.element_dict(record))
        await session.emit("element", payload)
        await publish_on_thread(session.thread_id, "element", payload, skip_session=session.id)
        return self

    async def remove(self) -> None:
        """Delete the element and its bytes, and take it off the page."""
        session = require_session()
        await database_sync_to_async(element_service.remove_element)(session.user.pk, self.id)
        payload = {"id": str(self.id), "forId": str(self.for_id) if self.for_id else None}
        await session.emit("remove_element", payload)
        await publish_on_thread(session.thread_id, "remove_element", payload, skip_session=session.id)


class Image(Element):
    """A JPEG, PNG, GIF or WebP image; ``size`` is how large the page shows it."""

    type = "image"

    def __init__(
        self, name: str = "", *, size: Literal["small", "medium", "large"] = "medium", **kwargs: Any
    ):
        super().__init__(name, **kwargs)
        self.size: str = size

    def record_fields(self) -> dict[str, Any]:
        return {"image_size": self.size}


class File(Element):
    """Any file, offered as a download."""

    type = "file"


class Pdf(Element):
    """A PDF, shown in a frame (``page``: the page it opens at)."""

    type = "pdf"

    def __init__(self, name: str = "", *, page: int | None = None, **kwargs: Any):
        kwargs.setdefault("mime", "application/pdf")
        super().__init__(name, **kwargs)
        self.page: int | None = page

    def record_fields(self) -> dict[str, Any]:
        return {"page": self.page}


class Text(Element):
    """A text, shown as a code block (``language`` names its highlighting)."""

    type = "text"

    def __init__(self, name: str = "", *, language: str | None = None, **kwargs: Any):
        kwargs.setdefault("mime", "text/plain")
        super().__init__(name, **kwargs)
        self.language: str | None = language

    def record_fields(self) -> dict[str, Any]:
        return {"language": self.language or ""}


class Plotly(Element):
    """A Plotly figure, rendered by the page (plotly.js is vendored; the Python package is not
    needed): ``figure`` is a figure object (anything with ``to_json()``) or its JSON dict."""

    type = "plotly"

    def __init__(self, name: str = "", *, figure: Any = None, size: str = "medium", **kwargs: Any):
        if figure is not None:
            kwargs["content"] = figure_json(figure)
        kwargs.setdefault("mime", "application/json")
        super().__init__(name, **kwargs)
        self.size: str = size

    def record_fields(self) -> dict[str, Any]:
        return {"image_size": self.size}


class CustomElement(Element):
    """Chainlit's ``CustomElement(name="Counter", props={...})``: a component of the app's own
    (in Chainlit a ``public/elements/<name>.jsx`` file). It goes out as Chainlit sends it
    (type ``custom``, the ``props`` in the ElementDict, the props' JSON as its content);
    Tether's page has no way to run the app's component, so it shows the element's name and
    props instead. A client of its own can render it."""

    type = "custom"

    def __init__(self, name: str = "", *, props: dict[str, Any] | None = None, **kwargs: Any):
        props = dict(props or {})
        kwargs["content"] = json.dumps(props)
        kwargs.setdefault("mime", "application/json")
        super().__init__(name, props=props, **kwargs)


def figure_json(figure: Any) -> str:
    if hasattr(figure, "to_json"):
        text = figure.to_json()
        json.loads(text)  # a figure whose JSON does not parse is refused here, not in the page
        return str(text)
    if isinstance(figure, dict):
        return json.dumps(figure)
    if isinstance(figure, str):
        json.loads(figure)
        return figure
    raise TypeError("figure must be a plotly figure (with to_json()), a dict or a JSON string")


CLASSES: dict[str, type[Element]] = {cls.type: cls for cls in (Image, File, Pdf, Text, Plotly, CustomElement)}


def from_record(record: ElementRecord) -> Element:
    """The element object of a stored element (what ``on_message`` sees of a user's files):
    ``content`` its bytes, read when first used; ``path`` a local file when the storage has
    one."""
    cls = CLASSES.get(record.type, File)
    element = cls.__new__(cls)
    Element.__init__(
        element,
        record.name,
        display=record.display,  # type: ignore[arg-type]  # one of the model's choices
        content=b"",
        mime=record.mime,
        for_id=record.for_id,
        id=record.pk,
        props=record.props,
    )
    element.content = None
    element._read_stored = functools.partial(element_service.element_bytes, record)  # noqa: SLF001 - its own class's state
    element.path = element_service.element_path(record)
    element.thread_id = record.thread_id
    element.size_bytes = record.size
    if isinstance(element, Image | Plotly):
        element.size = record.image_size or "medium"
    if isinstance(element, Pdf):
        element.page = record.page
    if isinstance(element, Text):
        element.language = record.language or None
    return element


def _shown(payload: dict[str, Any]) -> dict[str, Any]:
    """An ElementDict as sent live: one of the turn's user message names it by the id its
    client chose (as the message and its nested steps are shown: ``wire.live_user_step``)."""
    shown_as = turn_message_shown_as.get()
    if shown_as and payload.get("forId") == str(turn_message.get()):
        return {**payload, "forId": shown_as}
    return payload


def _incoming(owner_id: int, step_id: uuid.UUID) -> tuple[list[Element], list[dict[str, Any]]]:
    records = element_service.elements_for(owner_id, step_id)
    return [from_record(r) for r in records], [element_service.element_dict(r) for r in records]


async def incoming_elements(step_id: uuid.UUID) -> list[Element]:
    """The files a user's message carries (attached when it was accepted), shown to the page
    with the message; ``message.elements`` of ``on_message``."""
    session = require_session()
    found, payloads = await database_sync_to_async(_incoming)(session.user.pk, step_id)
    for payload in map(_shown, payloads):
        await session.emit("element", payload)
        await publish_on_thread(session.thread_id, "element", payload, skip_session=session.id)
    return found
