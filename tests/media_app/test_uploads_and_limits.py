"""POST /api/uploads/ and the images of POST /api/chat/send: JPEG, PNG, GIF or WebP told by
their bytes, at most MAX_IMAGE_BYTES each and MAX_IMAGES_PER_MESSAGE per message, refused
with clear 400s. (The accepted sends themselves are exercised end to end in test_photos_live.)"""

import uuid
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from media_app.images import ImageRejected
from media_app.models import Upload
from media_app.services import blocks_for_uploads, parse_references
from tests.media_app.photos import MAGIC, b64, photo
from threads_app.models import AcceptedMessage, Thread

pytestmark = pytest.mark.django_db

NOT_AN_IMAGE = "The file is not a JPEG, PNG, GIF or WebP image (checked by its content, not its name)."


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user(username="uploader", password="pw-for-tests-1")


@pytest.fixture
def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def upload(api: APIClient, data: bytes, name: str = "photo.jpg"):
    return api.post("/api/uploads/", {"file": SimpleUploadedFile(name, data)}, format="multipart")


@pytest.mark.parametrize("content_type", sorted(MAGIC))
def test_an_upload_of_each_allowed_type_is_stored_with_its_sniffed_type(api, user, content_type):
    data = photo(content_type, 20_000)
    response = upload(api, data, name="whatever.bin")
    assert response.status_code == 201, response.content
    body = response.json()
    assert set(body) == {"id", "contentType", "size", "name"}
    assert body["contentType"] == content_type and body["size"] == len(data)
    stored = Upload.objects.get(pk=body["id"])
    assert stored.owner == user and bytes(stored.data) == data


def test_the_name_does_not_decide_the_type(api):
    response = upload(api, b"just some text, honestly " * 40, name="holiday.png")
    assert response.status_code == 400
    assert response.json() == {"file": [NOT_AN_IMAGE]}
    jpeg = upload(api, photo("image/jpeg"), name="holiday.png")
    assert jpeg.status_code == 201 and jpeg.json()["contentType"] == "image/jpeg"
    svg = upload(api, b'<svg xmlns="http://www.w3.org/2000/svg"></svg>', name="x.svg")
    assert svg.json() == {"file": [NOT_AN_IMAGE]}
    assert Upload.objects.count() == 1


def test_too_big_empty_and_missing_files_are_clear_400s(api, settings):
    settings.MAX_IMAGE_BYTES = 50_000
    big = upload(api, photo("image/png", 60_000))
    assert big.status_code == 400
    assert big.json() == {"file": ["The image is 60 KB; the limit is 50 KB."]}
    huge = upload(api, photo("image/png", 200_000))
    assert huge.status_code == 400 and "the limit is 50 KB" in huge.json()["file"][0]
    empty = upload(api, b"")
    assert empty.status_code == 400 and "empty" in empty.json()["file"][0]
    missing = api.post("/api/uploads/", {}, format="multipart")
    assert missing.status_code == 400 and missing.json() == {"file": ["No file was submitted."]}
    assert Upload.objects.count() == 0


def test_uploads_need_credentials_and_multipart(api):
    assert APIClient().post("/api/uploads/", {}, format="multipart").status_code == 401
    assert api.post("/api/uploads/", {"file": "x"}, format="json").status_code == 415


def test_file_references_name_the_callers_own_uploads_in_order(api, user, django_user_model, settings):
    first, second = photo("image/png", 3_000), photo("image/gif", 2_000)
    ids = [uuid.UUID(upload(api, data).json()["id"]) for data in (first, second)]
    blocks = blocks_for_uploads(user, parse_references([{"id": str(ids[1])}, str(ids[0])]))
    assert [b["source"]["media_type"] for b in blocks] == ["image/gif", "image/png"]
    assert [b["source"]["data"] for b in blocks] == [b64(second), b64(first)]
    stranger = django_user_model.objects.create_user(username="stranger", password="pw-for-tests-1")
    with pytest.raises(ImageRejected, match=r"no upload .* of yours"):
        blocks_for_uploads(stranger, ids)
    with pytest.raises(ImageRejected, match="not an upload id"):
        parse_references([{"id": "nope"}])
    with pytest.raises(ImageRejected, match="must be a list"):
        parse_references({"id": str(ids[0])})
    settings.MAX_IMAGES_PER_MESSAGE = 1
    with pytest.raises(ImageRejected, match=r"At most 1 images per message; this one has 2\."):
        parse_references([{"id": str(i)} for i in ids])


# --- the images of POST /api/chat/send ---------------------------------------------------------


def send(api: APIClient, images, message: str = "look") -> tuple[int, dict[str, Any]]:
    response = api.post(
        "/api/chat/send",
        {"messageId": str(uuid.uuid4()), "message": message, "images": images},
        format="json",
    )
    return response.status_code, response.json()


def test_send_refuses_bad_images_by_position_with_clear_messages(api, settings):
    settings.MAX_IMAGE_BYTES = 50_000
    good = {"mediaType": "image/png", "data": b64(photo("image/png", 1_000))}
    cases = [
        ({"data": b64(b"plain text that claims nothing " * 10)}, NOT_AN_IMAGE),
        (
            {"mediaType": "image/png", "data": b64(photo("image/jpeg", 1_000))},
            "The image is image/jpeg, not image/png.",
        ),
        ({"data": "this is not base64!"}, "The image data is not valid base64."),
        ({"data": b64(photo("image/webp", 60_000))}, "The image is about 60 KB; the limit is 50 KB."),
    ]
    for bad, message in cases:
        status, errors = send(api, [good, bad])
        assert status == 400, bad
        assert errors == {"images": {"1": {"data": [message]}}}
    status, errors = send(api, [{"mediaType": "image/svg+xml", "data": good["data"]}])
    assert status == 400 and "mediaType" in errors["images"]["0"]
    status, errors = send(api, [{"data": ""}])
    assert status == 400 and "data" in errors["images"]["0"]
    assert AcceptedMessage.objects.count() == 0 and Thread.objects.count() == 0


def test_send_refuses_too_many_images_before_decoding_any(api, settings):
    settings.MAX_IMAGES_PER_MESSAGE = 3
    status, errors = send(api, [{"data": "never decoded"}] * 4)
    assert status == 400
    assert errors == {"images": ["At most 3 images per message; this one has 4."]}
    status, errors = send(api, "not a list")
    assert status == 400 and "images" in errors


def test_a_blank_message_needs_images(api):
    status, errors = send(api, [], message="")
    assert status == 400 and errors == {"message": ["This field may not be blank."]}


def test_a_send_body_may_be_bigger_than_djangos_form_cap_but_not_than_its_photos_need(api, settings):
    settings.MAX_IMAGES_PER_MESSAGE = 1
    settings.MAX_IMAGE_BYTES = 10_000
    status, errors = send(api, [{"data": b64(photo("image/png", 9_000))}] * 2)
    assert status == 400 and errors == {"images": ["At most 1 images per message; this one has 2."]}
    # Over what one photo of 10 KB and the text can take: refused before it is parsed.
    status, errors = send(api, [{"data": "A" * 1_100_000}])
    assert status == 400
    assert errors["detail"].startswith("The request body is over 1.0 MB")
