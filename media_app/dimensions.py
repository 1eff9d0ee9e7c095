"""A photo's width and height, read from its header without decoding any pixel.

A few kilobytes can declare an image of 50,000 x 50,000 pixels, which every viewer of the
conversation would then try to decode (gigabytes). The header says the size up front in all
four allowed formats, so it is read here and compared with ``MAX_IMAGE_PIXELS``:

- PNG: the IHDR chunk, which the format requires first;
- GIF: the logical screen descriptor;
- WebP: the VP8 (lossy), VP8L (lossless) or VP8X (extended) chunk header;
- JPEG: the first start-of-frame segment, found by walking the segments before it.
"""

import struct

# JPEG start-of-frame markers (SOF0-SOF15 but DHT, JPG and DAC, which share the range).
_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
# Markers that stand alone, without a length.
_STANDALONE = frozenset(range(0xD0, 0xDA)) | {0x01}


class UnreadableDimensions(ValueError):
    """The header does not say the image's size."""


def dimensions(data: bytes, content_type: str) -> tuple[int, int]:
    """``(width, height)`` of a photo of ``content_type`` (one of the allowed types)."""
    try:
        if content_type == "image/png":
            return _png(data)
        if content_type == "image/gif":
            return struct.unpack("<HH", data[6:10])
        if content_type == "image/webp":
            return _webp(data)
        if content_type == "image/jpeg":
            return _jpeg(data)
    except struct.error:
        pass
    raise UnreadableDimensions(content_type)


def _png(data: bytes) -> tuple[int, int]:
    if data[12:16] != b"IHDR":
        raise UnreadableDimensions("image/png")
    return struct.unpack(">II", data[16:24])


def _webp(data: bytes) -> tuple[int, int]:
    chunk = data[12:16]
    if chunk == b"VP8 " and data[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L" and data[20:21] == b"\x2f":
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":
        return int.from_bytes(data[24:27], "little") + 1, int.from_bytes(data[27:30], "little") + 1
    raise UnreadableDimensions("image/webp")


def _jpeg(data: bytes) -> tuple[int, int]:
    position = 2  # after SOI
    while position + 4 <= len(data):
        if data[position] != 0xFF:
            raise UnreadableDimensions("image/jpeg")
        marker = data[position + 1]
        if marker == 0xFF:  # fill byte
            position += 1
            continue
        if marker in _STANDALONE:
            position += 2
            continue
        (length,) = struct.unpack(">H", data[position + 2 : position + 4])
        if marker in _SOF_MARKERS:
            height, width = struct.unpack(">HH", data[position + 5 : position + 9])
            return width, height
        if marker == 0xDA or length < 2:  # start of scan before any frame header
            break
        position += 2 + length
    raise UnreadableDimensions("image/jpeg")
