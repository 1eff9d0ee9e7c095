"""A photo's width and height, read from its headers without decoding any pixel.

A few kilobytes can declare an image of 50,000 x 50,000 pixels, which every viewer of the
conversation would then try to decode (gigabytes). The headers say the size up front in all
four allowed formats, so they are read here and compared with ``MAX_IMAGE_PIXELS``. An
animated image has a header per frame, and a viewer draws a frame that reaches past the
declared canvas (Chromium decodes a GIF's 8000 x 8000 frame on a 1 x 1 screen), so the size
returned is the area that covers the canvas and every frame:

- PNG: the IHDR chunk, which the format requires first, and every APNG ``fcTL`` chunk;
- GIF: the logical screen descriptor and every image descriptor;
- WebP: the VP8 (lossy), VP8L (lossless) or VP8X (extended) chunk header, and in an extended
  file every ``ANMF`` frame and the bitstream header inside it;
- JPEG: the first start-of-frame segment, found by walking the segments before it.

The walks skip over pixel data by the lengths the blocks declare, one step per block. A file
crafted of tiny blocks could make that millions of steps, so a walk takes at most
``MAX_HEADER_BLOCKS`` (a 10 MB GIF of ordinary 255-byte blocks takes about 41,000) and a
file that needs more is unreadable. A walk ends where the file does: browsers show a
truncated image's frames so far, and those are counted.
"""

import struct

# JPEG start-of-frame markers (SOF0-SOF15 but DHT, JPG and DAC, which share the range).
_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
# Markers that stand alone, without a length.
_STANDALONE = frozenset(range(0xD0, 0xDA)) | {0x01}
# Blocks, chunks or sub-blocks one walk may step over (at most about 0.1 s of Python here).
MAX_HEADER_BLOCKS = 100_000


class UnreadableDimensions(ValueError):
    """The headers do not say the image's size (or would take too long to read)."""


class _Extent:
    """The smallest area from the origin that covers every rectangle added to it."""

    def __init__(self, width: int, height: int) -> None:
        self.width = width
        self.height = height

    def cover(self, left: int, top: int, width: int, height: int) -> None:
        self.width = max(self.width, left + width)
        self.height = max(self.height, top + height)

    def size(self) -> tuple[int, int]:
        return self.width, self.height


class _StepBudget:
    """Counts the steps of one walk; past ``MAX_HEADER_BLOCKS`` the image is unreadable."""

    def __init__(self, content_type: str) -> None:
        self.content_type = content_type
        self.left = MAX_HEADER_BLOCKS

    def step(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise UnreadableDimensions(self.content_type)


def dimensions(data: bytes, content_type: str) -> tuple[int, int]:
    """``(width, height)`` a viewer draws for a photo of ``content_type`` (one of the
    allowed types): its canvas, widened to cover every frame."""
    try:
        if content_type == "image/png":
            return _png(data)
        if content_type == "image/gif":
            return _gif(data)
        if content_type == "image/webp":
            return _webp(data)
        if content_type == "image/jpeg":
            return _jpeg(data)
    except (struct.error, IndexError):  # a header cut short
        pass
    raise UnreadableDimensions(content_type)


def _png(data: bytes) -> tuple[int, int]:
    if data[12:16] != b"IHDR":
        raise UnreadableDimensions("image/png")
    extent = _Extent(*struct.unpack(">II", data[16:24]))
    budget = _StepBudget("image/png")
    position = 8  # after the signature
    while position + 8 <= len(data):
        budget.step()
        length, chunk = struct.unpack_from(">I4s", data, position)
        body = position + 8
        if chunk == b"fcTL" and body + 20 <= len(data):
            width, height, left, top = struct.unpack_from(">IIII", data, body + 4)
            extent.cover(left, top, width, height)
        elif chunk == b"IEND":
            break
        position = body + length + 4  # the data, then its CRC
    return extent.size()


def _gif(data: bytes) -> tuple[int, int]:
    extent = _Extent(*struct.unpack("<HH", data[6:10]))
    budget = _StepBudget("image/gif")
    position = 13 + _color_table_bytes(data[10])  # after the screen descriptor and its table
    while position < len(data):
        budget.step()
        introducer = data[position]
        if introducer == 0x21:  # an extension: its label, then sub-blocks
            position = _skip_sub_blocks(data, position + 2, budget)
        elif introducer == 0x2C:  # an image descriptor: a frame
            if position + 10 > len(data):
                break
            left, top, width, height = struct.unpack_from("<HHHH", data, position + 1)
            extent.cover(left, top, width, height)
            position += 10 + _color_table_bytes(data[position + 9])
            position = _skip_sub_blocks(data, position + 1, budget)  # after the LZW code size
        else:  # the trailer, or bytes browsers stop at as if it were
            break
    return extent.size()


def _color_table_bytes(flags: int) -> int:
    """The size of the colour table that GIF ``flags`` announce (none without bit 7)."""
    return 3 << ((flags & 0x07) + 1) if flags & 0x80 else 0


def _skip_sub_blocks(data: bytes, position: int, budget: _StepBudget) -> int:
    """The position after a chain of GIF sub-blocks (each a length byte, then that many
    bytes; a zero length ends the chain)."""
    while position < len(data):
        budget.step()
        length = data[position]
        position += 1 + length
        if length == 0:
            break
    return position


def _webp(data: bytes) -> tuple[int, int]:
    chunk = data[12:16]
    if chunk == b"VP8X":
        return _extended_webp(data)
    size = _webp_bitstream_size(data, 12)
    if size is None:
        raise UnreadableDimensions("image/webp")
    return size


def _webp_bitstream_size(data: bytes, position: int) -> tuple[int, int] | None:
    """The size a VP8 or VP8L chunk at ``position`` declares (None for other chunks)."""
    chunk = data[position : position + 4]
    if chunk == b"VP8 " and data[position + 11 : position + 14] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", data[position + 14 : position + 18])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L" and data[position + 8 : position + 9] == b"\x2f":
        bits = int.from_bytes(data[position + 9 : position + 13], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    return None


def _extended_webp(data: bytes) -> tuple[int, int]:
    extent = _Extent(_u24(data, 24) + 1, _u24(data, 27) + 1)
    budget = _StepBudget("image/webp")
    position = 12
    while position + 8 <= len(data):
        budget.step()
        length = int.from_bytes(data[position + 4 : position + 8], "little")
        body = position + 8
        if data[position : position + 4] == b"ANMF" and body + 16 <= len(data):
            left, top = _u24(data, body) * 2, _u24(data, body + 3) * 2
            extent.cover(left, top, _u24(data, body + 6) + 1, _u24(data, body + 9) + 1)
            _cover_frame_bitstreams(data, body + 16, min(body + length, len(data)), left, top, extent, budget)
        elif data[position : position + 3] == b"VP8":
            bitstream = _webp_bitstream_size(data, position)
            if bitstream is not None:
                extent.cover(0, 0, *bitstream)
        position = body + length + (length & 1)  # chunks are padded to an even size
    return extent.size()


def _cover_frame_bitstreams(
    data: bytes, position: int, end: int, left: int, top: int, extent: _Extent, budget: _StepBudget
) -> None:
    """Cover the VP8 / VP8L bitstreams inside an ANMF frame (its ``ALPH`` and unknown chunks
    are stepped over): a decoder sizes the frame by them."""
    while position + 8 <= end:
        budget.step()
        bitstream = _webp_bitstream_size(data, position)
        if bitstream is not None:
            extent.cover(left, top, *bitstream)
        length = int.from_bytes(data[position + 4 : position + 8], "little")
        position += 8 + length + (length & 1)


def _u24(data: bytes, position: int) -> int:
    if position + 3 > len(data):
        raise struct.error("truncated")
    return int.from_bytes(data[position : position + 3], "little")


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
