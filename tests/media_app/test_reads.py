"""Every history read strips photos (history, bootstrap, the ThreadDict of resume_thread), and
every reference it mints resolves at GET /api/session-media/<ref> to the photo's bytes."""

import uuid
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from media_app.stripping import NOT_DISPLAYED, UNREADABLE
from tests.media_app.photos import (
    assert_no_payload,
    failed_block,
    image_block,
    image_refs,
    photo,
)
from threads_app.models import AcceptedMessage, Step
from threads_app.selectors import owned_thread_dict, step_dicts
from threads_app.services import accept_message, ensure_thread, upsert_step
from threads_app.wire import step_to_dict

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


class PhotoThread:
    """A thread whose second step carries photos of every kind, in several places."""

    def __init__(self, user) -> None:
        self.thread, _ = ensure_thread(user, uuid.uuid4(), name="photos")
        self.jpeg = photo("image/jpeg", 300_000)
        self.png = photo("image/png", 120_000)
        self.gif = photo("image/gif", 300)  # small: its payload is shorter than the scan's threshold
        self.webp = photo("image/webp", 5_000)
        self.step_ids = [uuid.uuid4() for _ in range(3)]
        upsert_step(self.thread.pk, self.step_ids[0], type="assistant_message", output="hello")
        upsert_step(
            self.thread.pk,
            self.step_ids[1],
            type="user_message",
            output="four photos, one failed",
            content=[
                image_block(self.jpeg),
                {"type": "text", "text": "four photos, one failed"},
                failed_block(),
                {"type": "tool_result", "tool_use_id": "x", "content": [image_block(self.png, "image/png")]},
                image_block(self.gif, "image/gif"),
                image_block(self.webp, "image/webp"),
            ],
        )
        upsert_step(self.thread.pk, self.step_ids[2], type="assistant_message", output="nice photos")
        self.photo_step = self.step_ids[1]
        # index -> bytes, in the order the enumeration counts them (1 is the failed upload)
        self.expected = {0: self.jpeg, 2: self.png, 3: self.gif, 4: self.webp}
        self.types = {0: "image/jpeg", 2: "image/png", 3: "image/gif", 4: "image/webp"}

    def ref(self, index: int) -> str:
        return f"{self.thread.pk}/{self.photo_step}/{index}"


@pytest.fixture
def photos(user) -> PhotoThread:
    return PhotoThread(user)


def expected_content(photos: PhotoThread) -> list[dict[str, Any]]:
    return [
        {"type": "image", "imageRef": photos.ref(0)},
        {"type": "text", "text": "four photos, one failed"},
        {"type": "text", "text": NOT_DISPLAYED},
        {
            "type": "tool_result",
            "tool_use_id": "x",
            "content": [{"type": "image", "imageRef": photos.ref(2)}],
        },
        {"type": "image", "imageRef": photos.ref(3)},
        {"type": "image", "imageRef": photos.ref(4)},
    ]


def test_history_bootstrap_and_the_thread_dict_carry_refs_not_payloads(api, user, photos):
    history = api.get(f"/api/threads/{photos.thread.pk}/history/")
    bootstrap = api.get(f"/api/threads/{photos.thread.pk}/bootstrap/")
    assert history.status_code == bootstrap.status_code == 200
    thread_dict = owned_thread_dict(user, photos.thread.pk)  # what resume_thread emits
    assert thread_dict is not None
    for body, steps in (
        (history.content.decode(), history.json()["results"]),
        (bootstrap.content.decode(), bootstrap.json()["entries"]),
        (thread_dict, thread_dict["steps"]),
    ):
        assert_no_payload(body)
        assert [s["id"] for s in steps] == [str(i) for i in photos.step_ids]
        assert steps[1]["content"] == expected_content(photos)
    # A bootstrap limited to the last entries, and a page of history, strip the same way.
    last = api.get(f"/api/threads/{photos.thread.pk}/bootstrap/", {"limit": 2}).json()["entries"]
    assert last[0]["content"] == expected_content(photos)
    page = api.get(f"/api/threads/{photos.thread.pk}/history/", {"after_seq": 1, "limit": 1}).json()
    assert page["results"][0]["content"] == expected_content(photos)
    # What the live path emits for a step (built from the model instance) says the same.
    assert step_to_dict(Step.objects.get(pk=photos.photo_step))["content"] == expected_content(photos)


def test_every_ref_resolves_to_the_identical_bytes_with_type_etag_and_cache(api, photos):
    steps = api.get(f"/api/threads/{photos.thread.pk}/history/").json()["results"]
    refs = image_refs(steps[1]["content"])
    assert refs == [photos.ref(i) for i in (0, 2, 3, 4)]  # the failed upload has no ref
    etags = set()
    for ref in refs:
        index = int(ref.rsplit("/", 1)[1])
        response = api.get(f"/api/session-media/{ref}")
        assert response.status_code == 200, response.content
        assert response.content == photos.expected[index]
        assert response["Content-Type"] == photos.types[index]
        assert response["Cache-Control"] == "private, max-age=31536000, immutable"
        assert response["Content-Length"] == str(len(photos.expected[index]))
        etag = response["ETag"]
        assert etag.startswith('"') and etag.endswith('"')
        etags.add(etag)
        again = api.get(f"/api/session-media/{ref}", HTTP_IF_NONE_MATCH=etag)
        assert again.status_code == 304
        assert again.content == b""
        assert again["ETag"] == etag
        assert again["Cache-Control"] == "private, max-age=31536000, immutable"
        assert api.get(f"/api/session-media/{ref}", HTTP_IF_NONE_MATCH='"other"').status_code == 200
    assert len(etags) == 4


def test_a_failed_upload_and_a_missing_index_have_no_photo(api, photos):
    assert api.get(f"/api/session-media/{photos.ref(1)}").status_code == 404
    assert api.get(f"/api/session-media/{photos.ref(5)}").status_code == 404
    assert api.get(f"/api/session-media/{photos.thread.pk}/{photos.step_ids[0]}/0").status_code == 404


@pytest.mark.parametrize(
    "tampered",
    [
        "{thread}/{step}/1000",
        "{thread}/{step}/-1",
        "{thread}/{step}",
        "{thread}/{step}/0/1",
        "{thread}/{step}/x",
        "{thread}/st%20ep/0",
        "{thread}/{long}/0",
        "{thread}//0",
        "..%2F..%2Fetc/passwd/0",
    ],
)
def test_a_tampered_ref_is_a_400(api, photos, tampered):
    ref = tampered.format(thread=photos.thread.pk, step=photos.photo_step, long="a" * 65)
    response = api.get(f"/api/session-media/{ref}")
    assert response.status_code == 400, (ref, response.status_code)
    assert response["Content-Type"] == "application/json"
    assert "<threadId>/<stepId>/<index>" in response.json()["detail"]


def test_another_users_ref_is_a_404_and_so_is_a_made_up_one(api, photos, django_user_model):
    stranger = APIClient()
    stranger.force_authenticate(
        django_user_model.objects.create_user(username="stranger", password="pw-x-12345")
    )
    response = stranger.get(f"/api/session-media/{photos.ref(0)}")
    assert response.status_code == 404
    assert response.json() == {"detail": "No such image."}
    assert api.get(f"/api/session-media/{uuid.uuid4()}/{photos.photo_step}/0").status_code == 404
    assert api.get(f"/api/session-media/{photos.thread.pk}/{uuid.uuid4()}/0").status_code == 404
    assert api.get(f"/api/session-media/not-a-uuid/{photos.photo_step}/0").status_code == 404
    assert APIClient().get(f"/api/session-media/{photos.ref(0)}").status_code == 401
    # A deleted thread's photos go with it.
    photos.thread.deleted_at = photos.thread.updated_at
    photos.thread.save()
    assert api.get(f"/api/session-media/{photos.ref(0)}").status_code == 404


def test_an_img_tag_asking_for_images_gets_the_photo_and_json_errors(api, photos):
    accept = "image/avif,image/webp,image/png"
    response = api.get(f"/api/session-media/{photos.ref(0)}", HTTP_ACCEPT=accept)
    assert response.status_code == 200 and response.content == photos.jpeg
    missing = api.get(f"/api/session-media/{photos.ref(1)}", HTTP_ACCEPT=accept)
    assert missing.status_code == 404 and missing["Content-Type"] == "application/json"


def corrupt(step_id: uuid.UUID) -> None:
    """Make a row unreadable: on SQLite, text that is not JSON at all (past the JSON_VALID
    check, as a damaged file would be); on PostgreSQL, where jsonb is always valid JSON, a
    value that is not a list."""
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA ignore_check_constraints = ON")
            cursor.execute(
                "UPDATE threads_app_step SET content = %s WHERE id = %s", ['[{"type": "te', step_id.hex]
            )
            cursor.execute("PRAGMA ignore_check_constraints = OFF")
    else:
        Step.objects.filter(pk=step_id).update(content={"not": "a list"})


@pytest.mark.parametrize("damage", ["corrupt", "not a list"])
def test_a_row_that_cannot_be_read_is_a_stub_not_an_error(api, user, photos, damage):
    broken = photos.step_ids[0]
    if damage == "corrupt":
        corrupt(broken)
    else:
        Step.objects.filter(pk=broken).update(content="a string, not blocks")
    response = api.get(f"/api/threads/{photos.thread.pk}/history/")
    assert response.status_code == 200
    steps = response.json()["results"]
    assert steps[0]["content"] == [{"type": "text", "text": UNREADABLE}]
    assert steps[0]["output"] == "hello"  # the rest of the row reads fine
    assert steps[1]["content"] == expected_content(photos)
    assert api.get(f"/api/threads/{photos.thread.pk}/bootstrap/").status_code == 200
    record = owned_thread_dict(user, photos.thread.pk)
    assert record is not None and record["steps"][0]["content"][0]["text"] == UNREADABLE
    assert api.get(f"/api/session-media/{photos.thread.pk}/{broken}/0").status_code == 404


def test_pending_sends_show_refs_that_resolve_to_their_photos(api, user, photos):
    message_id = uuid.uuid4()
    pending_photo = photo("image/png", 40_000)
    accept_message(
        message_id=message_id,
        thread=photos.thread,
        author=user,
        text="not transcribed yet",
        images=[image_block(pending_photo, "image/png"), failed_block()],
    )
    body = api.get(f"/api/threads/{photos.thread.pk}/bootstrap/")
    assert_no_payload(body.content.decode())
    (pending,) = body.json()["pending"]
    # The ref names the send's key: the id of the user step that will transcribe it.
    key = AcceptedMessage.key(photos.thread.pk, message_id)
    ref = f"{photos.thread.pk}/{key}/0"
    assert pending["images"] == [{"type": "image", "imageRef": ref}, {"type": "text", "text": NOT_DISPLAYED}]
    response = api.get(f"/api/session-media/{ref}")
    assert response.status_code == 200 and response.content == pending_photo
    # Once transcribed under the same id, the ref names the step's block: the same photo.
    upsert_step(photos.thread.pk, key, type="user_message", content=[image_block(pending_photo, "image/png")])
    AcceptedMessage.objects.filter(client_id=message_id).update(state=AcceptedMessage.State.TRANSCRIBED)
    assert api.get(f"/api/session-media/{ref}").content == pending_photo


def test_chat_context_reads_are_stripped_too(photos):
    steps = step_dicts(photos.thread.pk, messages_only=True)
    assert_no_payload(steps)
    assert steps[1]["content"] == expected_content(photos)
