"""Upload budgets: a rate per user, a quota of bytes per user, a pixel limit read from the
image header, and expiry of old uploads (``manage.py purge_uploads``)."""

import asyncio
import io
import struct
import time
import uuid
import zlib
from datetime import timedelta
from io import StringIO
from typing import Any

import aiohttp
import pytest
from django.core.cache import cache
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.utils import timezone
from PIL import Image
from rest_framework.test import APIClient

from media_app.dimensions import dimensions
from media_app.models import Upload
from tests.media_app.photos import b64, photo
from tests.support.client import api_token
from tests.support.latency import assert_others_unaffected, latency_probe

pytestmark = pytest.mark.django_db


def png_declaring(width: int, height: int) -> bytes:
    """A PNG whose header declares ``width`` x ``height`` (a few bytes, however big it claims to be)."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + ihdr
    return (
        b"\x89PNG\r\n\x1a\n"
        + struct.pack(">I", 13)
        + chunk
        + struct.pack(">I", zlib.crc32(chunk))
        + b"\x00" * 64
    )


@pytest.fixture
def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    cache.delete(f"throttle_uploads_{user.pk}")
    return client


def upload(api: APIClient, data: bytes):
    return api.post("/api/uploads/", {"file": SimpleUploadedFile("p.png", data)}, format="multipart")


@pytest.mark.parametrize(
    ("fmt", "options", "content_type"),
    [
        ("PNG", {}, "image/png"),
        ("JPEG", {}, "image/jpeg"),
        ("JPEG", {"progressive": True}, "image/jpeg"),
        ("GIF", {}, "image/gif"),
        ("WEBP", {}, "image/webp"),
        ("WEBP", {"lossless": True}, "image/webp"),
    ],
)
def test_the_header_reader_agrees_with_pillow_on_real_images(fmt, options, content_type):
    for size in ((1, 1), (317, 89), (1024, 768)):
        out = io.BytesIO()
        Image.new("RGB", size, (200, 30, 90)).save(out, fmt, **options)
        assert dimensions(out.getvalue(), content_type) == size


def test_a_jpeg_with_exif_before_its_frame_header(tmp_path):
    out = io.BytesIO()
    exif = Image.Exif()
    exif[0x010E] = "x" * 5000  # ImageDescription: a long APP1 segment
    Image.new("RGB", (640, 480)).save(out, "JPEG", exif=exif)
    assert dimensions(out.getvalue(), "image/jpeg") == (640, 480)


def test_a_50000_by_50000_png_is_refused_by_upload_and_by_send(api):
    bomb = png_declaring(50_000, 50_000)
    response = upload(api, bomb)
    assert response.status_code == 400
    assert response.json() == {
        "file": ["The image is 50000 x 50000 pixels; the limit is 50,000,000 pixels in all."]
    }
    send = api.post(
        "/api/chat/send",
        {"messageId": str(uuid.uuid4()), "message": "look", "images": [{"data": b64(bomb)}]},
        format="json",
    )
    assert send.status_code == 400 and "50000 x 50000 pixels" in str(send.json())
    assert upload(api, png_declaring(5000, 5000)).status_code == 201
    assert Upload.objects.count() == 1


def test_a_header_without_a_size_is_refused(api):
    response = upload(api, b"\x89PNG\r\n\x1a\n" + b"\x00" * 200)
    assert response.status_code == 400
    assert response.json() == {"file": ["The image's width and height could not be read from its header."]}


def test_uploads_are_throttled_per_user(api, user, other_user, settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"uploads": "3/min"}}
    statuses = [upload(api, photo("image/png", 2_000)).status_code for _ in range(4)]
    assert statuses == [201, 201, 201, 429]
    other = APIClient()
    other.force_authenticate(other_user)
    cache.delete(f"throttle_uploads_{other_user.pk}")
    assert upload(other, photo("image/png", 2_000)).status_code == 201


def test_the_quota_counts_what_a_user_keeps(api, user, other_user, settings):
    settings.UPLOAD_QUOTA_BYTES = 25_000
    assert upload(api, photo("image/png", 10_000)).status_code == 201
    assert upload(api, photo("image/png", 10_000)).status_code == 201
    refused = upload(api, photo("image/png", 10_000))
    assert refused.status_code == 400
    assert refused.json()["file"][0].startswith("Your uploads already take 20 KB of your 25 KB quota")
    other = APIClient()
    other.force_authenticate(other_user)
    assert upload(other, photo("image/png", 10_000)).status_code == 201  # per user
    Upload.objects.filter(owner=user).update(created_at=timezone.now() - timedelta(hours=30))
    call_command("purge_uploads", stdout=StringIO())
    assert upload(api, photo("image/png", 10_000)).status_code == 201  # room again


def test_purge_uploads_deletes_the_old_ones_only(api, user, settings):
    settings.UPLOAD_EXPIRY_HOURS = 24
    ids = [upload(api, photo("image/png", 1_000)).json()["id"] for _ in range(3)]
    Upload.objects.filter(pk=ids[0]).update(created_at=timezone.now() - timedelta(hours=25))
    Upload.objects.filter(pk=ids[1]).update(created_at=timezone.now() - timedelta(hours=3))
    out = StringIO()
    call_command("purge_uploads", stdout=out)
    assert out.getvalue() == (
        "deleted 1 upload(s) older than 24 hours\ndeleted 0 element(s) of chats that never started a thread\n"
    )
    assert set(map(str, Upload.objects.values_list("pk", flat=True))) == {ids[1], ids[2]}
    call_command("purge_uploads", "--hours", "2", stdout=out)
    assert set(map(str, Upload.objects.values_list("pk", flat=True))) == {ids[2]}


# --- against a real daphne ----------------------------------------------------------------------


UPLOADS, UPLOADS_PER_SECOND = 40, 40


@pytest.mark.abuse
@pytest.mark.django_db(transaction=True)
async def test_a_burst_of_uploads_is_throttled_a_pixel_bomb_refused_and_others_unaffected(server, make_user):
    """Before: 40 x 1 MB uploads in 0.9 s, no limit; a PNG declaring 50000 x 50000 accepted.
    Now the rate (30/min, the bomb counted) answers 429 past its burst, the bomb is a 400, and
    another user's messages are answered about as fast while the bursts come, at the
    finding's 40 a second."""
    token = await api_token(make_user())
    bomb, one_mb = png_declaring(50_000, 50_000), photo("image/png", 1_000_000)
    created = 0

    async def send(http: aiohttp.ClientSession, data: bytes) -> tuple[int, dict[str, Any]]:
        form = aiohttp.FormData()
        form.add_field("file", data, filename="p.png", content_type="image/png")
        async with http.post(f"{server.url}/api/uploads/", data=form) as response:
            return response.status, await response.json()

    async def burst() -> None:
        nonlocal created
        async with aiohttp.ClientSession(headers={"Authorization": f"Token {token}"}) as http:
            started_burst = time.monotonic()
            bomb_status, answer = await send(http, bomb)
            statuses = []
            for _ in range(UPLOADS):
                started = time.monotonic()
                statuses.append((await send(http, one_mb))[0])
                await asyncio.sleep(1 / UPLOADS_PER_SECOND - (time.monotonic() - started))
            # 30/min refills one every 2 s: a loaded machine that takes longer than the finding's
            # second for the burst earns those refills, and no more.
            refilled = int((time.monotonic() - started_burst) / 2) + 1
        if created == 0:  # the first burst: the whole budget is there
            assert bomb_status == 400 and "50000 x 50000 pixels" in answer["file"][0]
            # A burst of 30 (the bomb counted), then 429s but for what was refilled meanwhile.
            assert statuses[:29] == [201] * 29 and 429 in statuses, statuses
            assert set(statuses) <= {201, 429} and statuses.count(201) <= 29 + refilled, (refilled, statuses)
        else:  # later ones: what the rate refilled meanwhile, no more
            assert bomb_status in (400, 429) and set(statuses) <= {201, 429}, statuses
            assert statuses.count(201) <= 2 + refilled, (refilled, statuses)
        created += statuses.count(201)

    async with latency_probe(server, make_user()) as probe:
        await assert_others_unaffected(
            probe, burst, f"{UPLOADS} x 1 MB uploads a second", spacing=UPLOADS / UPLOADS_PER_SECOND / 10
        )
