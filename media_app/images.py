"""What a photo may be: JPEG, PNG, GIF or WebP, told by its first bytes (never by its name
or the type a client claims), at most ``MAX_IMAGE_BYTES``, at most ``MAX_IMAGE_PIXELS`` as
its header declares them, at most ``MAX_IMAGES_PER_MESSAGE`` per message; and the image
block a photo becomes."""

import base64
import binascii
from typing import Any

from django.conf import settings

from media_app.dimensions import UnreadableDimensions, dimensions

# The only content types a photo is ever stored or served with.
ALLOWED_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
ALLOWED_TEXT = "JPEG, PNG, GIF or WebP"


class ImageRejected(ValueError):
    """A photo that may not be accepted; the message says why, for the client."""


def sniff(head: bytes) -> str | None:
    """The content type the first bytes say, if it is one of ``ALLOWED_TYPES``."""
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(head) >= 12 and head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def max_image_bytes() -> int:
    return int(settings.MAX_IMAGE_BYTES)


def max_images() -> int:
    return int(settings.MAX_IMAGES_PER_MESSAGE)


def human_size(size: int) -> str:
    """A size for an error message: ``12.3 MB``, ``120 KB`` or ``800 bytes``."""
    if size >= 1_000_000:
        return f"{size / 1_000_000:.1f} MB"
    if size >= 1_000:
        return f"{size // 1_000} KB"
    return f"{size} bytes"


def check_size(size: int) -> None:
    if size == 0:
        raise ImageRejected("The image is empty.")
    if size > max_image_bytes():
        raise ImageRejected(f"The image is {human_size(size)}; the limit is {human_size(max_image_bytes())}.")


def check_type(head: bytes, claimed: str | None = None) -> str:
    """The sniffed content type; refuses other files, and a claimed type that disagrees."""
    content_type = sniff(head)
    if content_type is None:
        raise ImageRejected(f"The file is not a {ALLOWED_TEXT} image (checked by its content, not its name).")
    if claimed and claimed.lower() != content_type:
        raise ImageRejected(f"The image is {content_type}, not {claimed}.")
    return content_type


def max_pixels() -> int:
    return int(settings.MAX_IMAGE_PIXELS)


def check_pixels(data: bytes, content_type: str) -> None:
    """Refuse a photo whose header declares more than ``MAX_IMAGE_PIXELS`` (or says nothing)."""
    try:
        width, height = dimensions(data, content_type)
    except UnreadableDimensions:
        raise ImageRejected("The image's width and height could not be read from its header.") from None
    if width * height > max_pixels():
        raise ImageRejected(
            f"The image is {width} x {height} pixels; the limit is {max_pixels():,} pixels in all."
        )


def check_count(count: int) -> None:
    if count > max_images():
        raise ImageRejected(f"At most {max_images()} images per message; this one has {count}.")


def decode_base64(data: Any) -> bytes:
    if not isinstance(data, str) or not data:
        raise ImageRejected("The image data is empty.")
    # A base64 string of N characters holds about 3N/4 bytes: refuse huge ones before decoding.
    if len(data) * 3 // 4 > max_image_bytes() + 3:
        raise ImageRejected(
            f"The image is about {human_size(len(data) * 3 // 4)}; the limit is {human_size(max_image_bytes())}."
        )
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise ImageRejected("The image data is not valid base64.") from None


def image_block(content_type: str, data_base64: str) -> dict[str, Any]:
    """The content block a photo travels and is stored as (the Claude message format)."""
    return {"type": "image", "source": {"type": "base64", "media_type": content_type, "data": data_base64}}


def block_from_base64(data: Any, claimed: str | None = None) -> dict[str, Any]:
    """Validate a base64 photo a client sent and return its image block."""
    raw = decode_base64(data)
    check_size(len(raw))
    content_type = check_type(raw[:16], claimed)
    check_pixels(raw, content_type)
    return image_block(content_type, data)


def block_from_bytes(raw: bytes) -> dict[str, Any]:
    """An image block from stored photo bytes (already validated when they were uploaded)."""
    return image_block(check_type(raw[:16]), base64.b64encode(raw).decode("ascii"))
