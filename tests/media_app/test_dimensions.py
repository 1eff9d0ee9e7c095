"""The pixel limit counts every frame of an animated image, read from the frame headers
without decoding: a GIF's image descriptors, an APNG's ``fcTL`` chunks, an animated WebP's
``ANMF`` frames and the bitstreams inside them. A frame larger than the canvas it is drawn on
(a 1 x 1 screen holding an 8000 x 8000 frame) is what a browser decodes, so it is what counts.
"""

import io
import struct
import time
import zlib

import pytest
from django.core.cache import cache
from django.core.files.uploadedfile import SimpleUploadedFile
from PIL import Image
from rest_framework.test import APIClient

from media_app.dimensions import MAX_HEADER_BLOCKS, UnreadableDimensions, dimensions
from media_app.models import Upload

pytestmark = pytest.mark.django_db


def gif(screen: tuple[int, int], frames: list[tuple[int, int, int, int]]) -> bytes:
    """A GIF with a ``screen`` and a frame (left, top, width, height) per entry, each with a
    graphic control extension and a few bytes of LZW data, as an animation has."""
    out = b"GIF89a" + struct.pack("<HHBBB", *screen, 0x80, 0, 0) + b"\x00\x00\x00\xff\xff\xff"
    for left, top, width, height in frames:
        out += b"\x21\xf9\x04\x04\x0a\x00\x00\x00"  # graphic control: 10 cs, no transparency
        out += b"\x2c" + struct.pack("<HHHHB", left, top, width, height, 0)
        out += b"\x02" + b"\x10" + bytes(16) + b"\x00"  # LZW code size, one sub-block, the end
    return out + b";"


def png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def apng(canvas: tuple[int, int], frames: list[tuple[int, int, int, int]]) -> bytes:
    """An APNG of ``canvas`` with an ``fcTL`` per frame (left, top, width, height)."""
    out = b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", *canvas, 8, 2, 0, 0, 0))
    out += png_chunk(b"acTL", struct.pack(">II", len(frames), 0))
    for sequence, (left, top, width, height) in enumerate(frames):
        control = struct.pack(">IIIIIHHBB", sequence, width, height, left, top, 1, 10, 0, 0)
        out += png_chunk(b"fcTL", control)
        out += png_chunk(b"IDAT" if sequence == 0 else b"fdAT", zlib.compress(bytes(64)))
    return out + png_chunk(b"IEND", b"")


def webp_chunk(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("<I", len(body)) + body + (b"\x00" if len(body) % 2 else b"")


def vp8l(width: int, height: int) -> bytes:
    """A VP8L chunk whose bitstream header declares ``width`` x ``height``."""
    bits = (width - 1) | ((height - 1) << 14)
    return webp_chunk(b"VP8L", b"\x2f" + bits.to_bytes(4, "little") + bytes(16))


def u24(value: int) -> bytes:
    return value.to_bytes(3, "little")


def animated_webp(canvas: tuple[int, int], frames: list[tuple[int, int, int, int, bytes]]) -> bytes:
    """An animated WebP of ``canvas``; each frame (left, top, width, height, bitstream) as an
    ``ANMF`` chunk (offsets are stored halved, as the format has them)."""
    body = webp_chunk(b"VP8X", b"\x02\x00\x00\x00" + u24(canvas[0] - 1) + u24(canvas[1] - 1))
    body += webp_chunk(b"ANIM", bytes(6))
    for left, top, width, height, bitstream in frames:
        header = u24(left // 2) + u24(top // 2) + u24(width - 1) + u24(height - 1) + u24(100) + b"\x00"
        body += webp_chunk(b"ANMF", header + bitstream)
    return b"RIFF" + struct.pack("<I", 4 + len(body)) + b"WEBP" + body


@pytest.fixture
def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    cache.delete(f"throttle_uploads_{user.pk}")
    return client


def upload(api: APIClient, name: str, data: bytes):
    return api.post("/api/uploads/", {"file": SimpleUploadedFile(name, data)}, format="multipart")


BOMBS = [
    ("screen.gif", gif((1, 1), [(0, 0, 1, 1), (0, 0, 8000, 8000)])),
    ("offset.gif", gif((100, 100), [(0, 0, 100, 100), (60_000, 60_000, 10, 10)])),
    ("frames.png", apng((1, 1), [(0, 0, 1, 1), (0, 0, 8000, 8000)])),
    ("frames.webp", animated_webp((1, 1), [(0, 0, 1, 1, vp8l(1, 1)), (0, 0, 8000, 8000, vp8l(1, 1))])),
    # The ANMF header says 1 x 1; the bitstream inside it says 8000 x 8000.
    ("bitstream.webp", animated_webp((1, 1), [(0, 0, 1, 1, vp8l(8000, 8000))])),
]


@pytest.mark.parametrize(("name", "bomb"), BOMBS, ids=[name for name, _ in BOMBS])
def test_a_frame_bigger_than_its_canvas_is_refused_by_its_header(api, name, bomb):
    assert len(bomb) < 1_000
    response = upload(api, name, bomb)
    assert response.status_code == 400, response.content
    [reason] = response.json()["file"]
    assert reason.endswith("pixels; the limit is 50,000,000 pixels in all."), reason
    assert not Upload.objects.exists()


def test_the_same_animations_within_their_canvas_are_accepted(api):
    for name, ok in [
        ("ok.gif", gif((4000, 4000), [(0, 0, 4000, 4000), (100, 100, 3900, 3900)])),
        ("ok.png", apng((4000, 4000), [(0, 0, 4000, 4000), (10, 10, 100, 100)])),
        ("ok.webp", animated_webp((4000, 4000), [(0, 0, 4000, 4000, vp8l(4000, 4000))])),
    ]:
        assert upload(api, name, ok).status_code == 201, name
    assert Upload.objects.count() == 3


def test_the_frame_walk_reads_what_pillow_writes():
    """Pillow crops an animation's later frames to what changed (a frame at an offset) and
    writes fcTL chunks for APNG: the size read is the canvas, as Pillow reads it."""
    frames = [Image.new("RGB", (320, 200), (n * 40, 0, 0)) for n in range(4)]
    frames[2].paste((0, 255, 0), (100, 50, 180, 120))
    for fmt, content_type in (("GIF", "image/gif"), ("PNG", "image/png")):
        out = io.BytesIO()
        frames[0].save(out, fmt, save_all=True, append_images=frames[1:], duration=50, loop=0)
        assert dimensions(out.getvalue(), content_type) == (320, 200), fmt
        assert getattr(Image.open(io.BytesIO(out.getvalue())), "n_frames", 1) == 4


def test_a_file_of_tiny_blocks_is_unreadable_after_a_bounded_walk():
    """A GIF extension of one-byte sub-blocks takes a step per two bytes; past
    ``MAX_HEADER_BLOCKS`` steps the walk gives up rather than hold the process."""
    tiny = b"GIF89a\x01\x00\x01\x00\x00\x00\x00" + b"\x21\xfe" + b"\x01x" * (MAX_HEADER_BLOCKS + 1)
    started = time.monotonic()
    with pytest.raises(UnreadableDimensions):
        dimensions(tiny + b"\x00;", "image/gif")
    assert time.monotonic() - started < 2
    fewer = b"GIF89a\x01\x00\x01\x00\x00\x00\x00" + b"\x21\xfe" + b"\x01x" * 1000 + b"\x00;"
    assert dimensions(fewer, "image/gif") == (1, 1)


def test_a_truncated_animation_counts_the_frames_it_has():
    whole = gif((10, 10), [(0, 0, 10, 10), (0, 0, 8000, 8000)])
    cut = whole[: whole.index(b"\x2c", 30) + 10]  # the second descriptor, and nothing after it
    assert dimensions(cut, "image/gif") == (8000, 8000)
    assert dimensions(whole[:40], "image/gif") == (10, 10)
