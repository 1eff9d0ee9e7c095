"""Test photos: real headers in front of random bytes (nothing here decodes pixels)."""

import base64
import json
import os
import re
from typing import Any

# Each head declares a small size (64 x 48; GIF 1 x 1), which the pixel limit reads.
MAGIC = {
    "image/jpeg": b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    + b"\xff\xc0\x00\x11\x08\x00\x30\x00\x40\x03\x01\x22\x00\x02\x11\x01\x03\x11\x01",
    "image/png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x40\x00\x00\x00\x30",
    # The screen descriptor, then the trailer: the random bytes after it are not frames.
    "image/gif": b"GIF89a\x01\x00\x01\x00\x00\x00\x00;",
    "image/webp": b"RIFF\x00\x00\x00\x00WEBPVP8 \x00\x00\x00\x00\x00\x00\x00\x9d\x01\x2a\x40\x00\x30\x00",
}
# A run of base64 this long in a response means a payload leaked.
LONG_BASE64 = re.compile(r"[A-Za-z0-9+/=]{200,}")


def photo(content_type: str = "image/jpeg", size: int = 50_000) -> bytes:
    head = MAGIC[content_type]
    return head + os.urandom(max(0, size - len(head)))


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def image_block(data: bytes, content_type: str = "image/jpeg") -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": content_type, "data": b64(data)}}


def failed_block() -> dict[str, Any]:
    """What a failed upload leaves in a transcript: an image block with nothing behind it."""
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": ""}}


def assert_no_payload(value: Any) -> None:
    text = value if isinstance(value, str) else json.dumps(value)
    leaked = LONG_BASE64.search(text)
    assert leaked is None, f"a base64 payload leaked: {leaked.group(0)[:60]}..."


def image_refs(blocks: list[dict[str, Any]]) -> list[str]:
    refs = []
    for block in blocks:
        if block.get("type") == "image":
            refs.append(block["imageRef"])
        elif isinstance(block.get("content"), list):
            refs.extend(image_refs(block["content"]))
    return refs
