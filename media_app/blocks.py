"""The one enumeration of image blocks, and the photo references minted from it.

A reference ``<threadId>/<entryId>/<index>`` names the ``index``-th image block of one
transcript entry (a Step, or a send not transcribed yet). The code that mints references
(``media_app.stripping``, on every history read) and the code that follows them back
(``media_app.services.read_image``, behind ``GET /api/session-media/<ref>``) must count image
blocks the same way, so both call ``image_blocks`` below and nothing else counts them.

The count: image blocks in document order, at the top level of the content list and one level
down, in the ``content`` list of a block that has one (a ``tool_result``, the only place the
Claude message format nests images). Deeper blocks are not images as far as Tether is
concerned.
"""

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

# Ids are word characters and hyphens, 1 to 64 long; the index is 0 to 999.
REF_PATTERN = re.compile(r"([\w-]{1,64})/([\w-]{1,64})/(\d{1,3})", re.ASCII)
MAX_INDEX = 999

# Where a history read took a payload out. Not base64 (``~`` is not in its alphabet), so it
# can never be mistaken for a payload, nor a payload for it.
STRIPPED_MARKER = "~stripped~"


@dataclass(frozen=True)
class ImageBlock:
    """An image block of a content list: its ``index`` in the count, and where it sits
    (``path``: list positions and keys from the top of the content list)."""

    index: int
    path: tuple[int | str, ...]
    block: dict[str, Any]

    @property
    def payload(self) -> str | None:
        """The block's base64 payload (or the marker left in its place), or None when it has
        none: no ``source`` object, no ``data`` string, or an empty one (a failed upload)."""
        source = self.block.get("source")
        data = source.get("data") if isinstance(source, dict) else None
        return data if isinstance(data, str) and data else None

    @property
    def payload_path(self) -> tuple[int | str, ...]:
        return (*self.path, "source", "data")


def _is_image(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "image"


def image_blocks(blocks: Any) -> Iterator[ImageBlock]:
    """Every image block of a content list, in document order, numbered from 0."""
    if not isinstance(blocks, list):
        return
    index = 0
    for position, block in enumerate(blocks):
        if _is_image(block):
            yield ImageBlock(index, (position,), block)
            index += 1
        elif isinstance(block, dict) and isinstance(block.get("content"), list):
            for inner_position, inner in enumerate(block["content"]):
                if _is_image(inner):
                    yield ImageBlock(index, (position, "content", inner_position), inner)
                    index += 1


def find_image(blocks: Any, index: int) -> ImageBlock | None:
    return next((image for image in image_blocks(blocks) if image.index == index), None)


# --- references ---------------------------------------------------------------------------


@dataclass(frozen=True)
class MediaRef:
    thread_id: str
    entry_id: str
    index: int

    def __str__(self) -> str:
        return f"{self.thread_id}/{self.entry_id}/{self.index}"


class InvalidRef(ValueError):
    """Not a media reference: ids of word characters and hyphens (1 to 64), index 0 to 999."""


def make_ref(thread_id: Any, entry_id: Any, index: int) -> str:
    return str(MediaRef(str(thread_id), str(entry_id), index))


def parse_ref(value: str) -> MediaRef:
    match = REF_PATTERN.fullmatch(value or "")
    if match is None or int(match.group(3)) > MAX_INDEX:
        raise InvalidRef(
            "A media reference is <threadId>/<stepId>/<index>: ids of 1 to 64 letters, digits, "
            "underscores or hyphens, and an index from 0 to 999."
        )
    return MediaRef(match.group(1), match.group(2), int(match.group(3)))
