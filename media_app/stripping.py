"""Photos out of every history read: the payloads stay in the database, references go out.

A user step holds its photos inline, as base64 image blocks: an image-bearing row is 1 MB or
more. A history read (history, bootstrap, ``resume_thread``) must neither ship nor parse
those payloads, so the database hands back each row with its payloads already replaced by
``STRIPPED_MARKER``, and only that small text is parsed here:

- PostgreSQL keeps ``jsonb`` pre-parsed; rendering it as text is what a naive read spends its
  time on, so the function ``tether_strip_media(jsonb)`` (migration ``0002``) walks the
  stored value and overwrites the payloads of image blocks without ever rendering them;
- SQLite keeps JSON as text: ``tether_strip_media(text)`` is ``strip_text`` below, registered
  on every connection, a linear scan of the stored text that replaces every long base64
  ``"data"`` string, one row at a time, without parsing it.

Then ``display_blocks`` walks the small skeleton with the shared enumeration
(``media_app.blocks.image_blocks``): an image block with a payload (the marker, or a short
payload the scan left) becomes ``{"type": "image", "imageRef": "<threadId>/<entryId>/<index>"}``;
one without (an empty or missing payload: a failed upload) becomes the text
``[image not displayed]``. A row that cannot be read becomes a one-block stub.
"""

import json
import logging
import re
from typing import Any, cast

from django.db.models import Expression, F, Func, TextField

from media_app.blocks import MAX_INDEX, STRIPPED_MARKER, image_blocks, make_ref

logger = logging.getLogger(__name__)

NOT_DISPLAYED = "[image not displayed]"
UNREADABLE = "[message could not be read]"
SQL_FUNCTION = "tether_strip_media"
# The stored text of a step without content blocks, on both databases.
EMPTY_LIST = "[]"

# A base64 string value of a ``"data"`` key, at least this long, is a payload. The key must
# be a key of the JSON structure (after ``{`` or ``,``): inside a JSON string every quote is
# escaped, so text that merely mentions ``"data":"..."`` never matches. Shorter payloads are
# left to ``display_blocks``, which drops them from image blocks after the (small) parse.
MIN_PAYLOAD_CHARS = 1024
PAYLOAD = re.compile(r'([{,]\s*"data"\s*:\s*")[A-Za-z0-9+/=]{' + str(MIN_PAYLOAD_CHARS) + ',}"')


def strip_text(text: str) -> str:
    """The stored JSON text with every long base64 ``"data"`` payload replaced by the marker."""
    return PAYLOAD.sub(lambda match: f'{match.group(1)}{STRIPPED_MARKER}"', text)


def sqlite_strip_media(value: Any) -> str | None:
    """``tether_strip_media(text)`` for SQLite. It never raises (an exception would fail the
    whole query): a value it cannot handle comes back as NULL and reads as a stub."""
    try:
        if isinstance(value, bytes):
            value = value.decode()
        return strip_text(value) if isinstance(value, str) else None
    except Exception:
        return None


def register_sqlite_function(sender: Any, connection: Any, **kwargs: Any) -> None:
    """``connection_created`` receiver: give every SQLite connection the strip function."""
    if connection.vendor == "sqlite":
        connection.connection.create_function(SQL_FUNCTION, 1, sqlite_strip_media, deterministic=True)


class StrippedJSON(Func):
    """A JSON column (a content list) as small text, its payloads replaced in the database.

    Databases other than PostgreSQL and SQLite get the column as text, and ``display_text``
    does the scan after the fetch instead."""

    function = SQL_FUNCTION
    output_field = TextField()

    def __init__(self, name: str) -> None:
        super().__init__(F(name))

    # The template is this expression's own: the compiler never passes one.
    def as_sql(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:  # type: ignore[override]
        return Func.as_sql(
            self, compiler, connection, template="CAST(%(expressions)s AS TEXT)", **extra_context
        )

    def as_sqlite(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:
        return Func.as_sql(self, compiler, connection, **extra_context)

    def as_postgresql(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:
        # An empty list (most steps) skips the function: a plpgsql call a row is most of
        # what the database spends on a read of many steps.
        template = (
            f"CASE WHEN %(expressions)s = '{EMPTY_LIST}'::jsonb THEN '{EMPTY_LIST}' "
            "ELSE %(function)s(%(expressions)s)::text END"
        )
        return Func.as_sql(self, compiler, connection, template=template, **extra_context)


class Unreadable(ValueError):
    """A row whose content is not a readable JSON list."""


def load_stripped(text: str | None) -> list[Any]:
    """The blocks of a row's stripped text (``StrippedJSON``): small, so parsing is cheap."""
    if text is None:
        raise Unreadable("not a JSON list")
    try:
        # Already stripped by the database; on other databases this is the scan.
        blocks = json.loads(strip_text(text))
    except (ValueError, RecursionError) as exc:
        raise Unreadable(f"invalid JSON ({exc})") from None
    if not isinstance(blocks, list):
        raise Unreadable("not a JSON list")
    return blocks


def display_text(thread_id: Any, entry_id: Any, text: str | None) -> list[dict[str, Any]]:
    """The blocks clients see, from a row's stripped text; a stub if it cannot be read."""
    if text == EMPTY_LIST:
        return []  # most steps: nothing to scan or parse
    try:
        blocks = load_stripped(text)
    except Unreadable as exc:
        logger.warning("content of entry %s in thread %s could not be read: %s", entry_id, thread_id, exc)
        return [{"type": "text", "text": UNREADABLE}]
    return cast("list[dict[str, Any]]", display_blocks(thread_id, entry_id, blocks))


def display_blocks(thread_id: Any, entry_id: Any, blocks: Any) -> Any:
    """``blocks`` with every image block replaced by its reference or by the "not displayed"
    text. The input is not modified; what does not change is shared with it."""
    if not isinstance(blocks, list):
        return blocks
    out = list(blocks)
    copied: set[int] = set()
    for image in image_blocks(blocks):
        if image.payload is not None and image.index <= MAX_INDEX:
            shown: dict[str, Any] = {"type": "image", "imageRef": make_ref(thread_id, entry_id, image.index)}
        else:
            shown = {"type": "text", "text": NOT_DISPLAYED}
        if len(image.path) == 1:
            out[cast(int, image.path[0])] = shown  # a top-level block: its list index
            continue
        position, _key, inner_position = image.path
        assert isinstance(position, int) and isinstance(inner_position, int)
        if position not in copied:
            out[position] = {**blocks[position], "content": list(blocks[position]["content"])}
            copied.add(position)
        out[position]["content"][inner_position] = shown
    return out


class MediaContentFilter:
    """What ``threads_app.content_filters`` calls on every transcript read."""

    def column(self, name: str) -> Expression:
        return StrippedJSON(name)

    def from_text(self, thread_id: Any, entry_id: Any, text: str | None) -> list[dict[str, Any]]:
        return display_text(thread_id, entry_id, text)

    def from_blocks(self, thread_id: Any, entry_id: Any, blocks: Any) -> Any:
        return display_blocks(thread_id, entry_id, blocks)
