"""Elements made from uploads share the upload's stored file (``media_app.shared_files``):
sends naming the same uploads store no more bytes, and a file goes only with the last row
that uses it (an element removed, a thread deleted, the upload purged)."""

import asyncio
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from media_app import elements
from media_app.models import Element, Upload
from media_app.services import purge_uploads
from tests.apps.elements_app import pdf, png
from threads_app import services as thread_services

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def elements_dir(settings, tmp_path: Path) -> Path:
    settings.STORAGES = {
        **settings.STORAGES,
        "tether_elements": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path)},
        },
    }
    settings.UPLOAD_ALLOWED_TYPES = ["image/*", "application/pdf", "text/plain"]
    return tmp_path


@pytest.fixture
def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def uploaded(api: APIClient, data: bytes, name: str) -> uuid.UUID:
    response = api.post("/api/uploads/", {"file": SimpleUploadedFile(name, data)}, format="multipart")
    assert response.status_code == 201, response.content
    return uuid.UUID(response.json()["id"])


def stored_bytes(root: Path) -> int:
    return sum(path.stat().st_size for path in root.rglob("*") if path.is_file())


def attach(user, thread_id: uuid.UUID, upload_ids: list[uuid.UUID]) -> list[Element]:
    """What a fresh hooks-API send does with its uploads (``hook_sends``): a new user step."""
    return elements.attach_uploads(user.pk, thread_id, uuid.uuid4(), upload_ids)


def test_ten_sends_naming_the_same_uploads_store_them_once(api, user, elements_dir):
    document, photo = pdf() + b"%" * 50_000, png()
    ids = [uploaded(api, document, "r.pdf"), uploaded(api, photo, "p.png")]
    after_uploads = stored_bytes(elements_dir)
    assert after_uploads == len(document)  # the photo is in its row
    thread, _ = thread_services.ensure_thread(user, uuid.uuid4(), name="t")
    made = [attach(user, thread.pk, ids) for _ in range(10)]
    # The file once, and the photo's bytes once as a file, whatever the number of sends.
    assert stored_bytes(elements_dir) == len(document) + len(photo), sorted(elements_dir.rglob("*"))
    assert len({element.storage_key for sent in made for element in sent}) == 2
    first, second = made[0]
    assert (first.type, first.size, first.mime, first.name) == (
        "pdf",
        len(document),
        "application/pdf",
        "r.pdf",
    )
    assert (second.type, second.size, second.mime) == ("image", len(photo), "image/png")
    assert elements.read_element(user.pk, made[9][0].pk).data == document
    assert elements.read_element(user.pk, made[9][1].pk).data == photo


def test_a_shared_file_goes_with_the_last_row_using_it(api, user, elements_dir):
    ids = [uploaded(api, pdf(), "r.pdf"), uploaded(api, png(), "p.png")]
    one, _ = thread_services.ensure_thread(user, uuid.uuid4(), name="one")
    two, _ = thread_services.ensure_thread(user, uuid.uuid4(), name="two")
    in_one, in_two = attach(user, one.pk, ids), attach(user, two.pk, ids)
    paths = [elements_dir / element.storage_key for element in in_one]
    assert [element.storage_key for element in in_one] == [element.storage_key for element in in_two]

    elements.remove_element(user.pk, in_one[0].pk)  # one message lets go of the file
    thread_services.soft_delete_thread(one)  # and a whole thread of the photo
    assert all(path.exists() for path in paths)
    assert elements.read_element(user.pk, in_two[0].pk).data == pdf()

    assert purge_uploads(timedelta(seconds=-1)) == 2  # the uploads go; the elements keep the files
    assert all(path.exists() for path in paths)
    assert elements.read_element(user.pk, in_two[1].pk).data == png()

    thread_services.soft_delete_thread(two)  # the last rows using them
    assert not any(path.exists() for path in paths)
    assert stored_bytes(elements_dir) == 0


def test_purging_an_upload_no_element_uses_deletes_its_file(api, user, elements_dir):
    kept, purged = uploaded(api, pdf(), "kept.pdf"), uploaded(api, b"plain text", "gone.txt")
    thread, _ = thread_services.ensure_thread(user, uuid.uuid4(), name="t")
    [element] = attach(user, thread.pk, [kept])
    gone = Upload.objects.get(pk=purged).storage_key
    purge_uploads(timedelta(seconds=-1))
    assert not (elements_dir / gone).exists()
    assert (elements_dir / element.storage_key).exists()


def test_another_users_uploads_are_not_attached(api, user, other_user):
    mine = uploaded(api, pdf(), "r.pdf")
    thread, _ = thread_services.ensure_thread(other_user, uuid.uuid4(), name="theirs")
    with pytest.raises(elements.ElementRejected, match="no upload"):
        elements.attach_uploads(other_user.pk, thread.pk, uuid.uuid4(), [mine])
    assert not Element.objects.exists()


def test_a_send_naming_uploads_reads_no_file_and_a_photo_once(api, user, monkeypatch):
    """Attaching shares keys: the storage is never read (a 50 MB file is not loaded into
    memory per send), and a photo's bytes are read from its row for the first send only."""
    from media_app import shared_files, storage

    ids = [uploaded(api, pdf(), "r.pdf"), uploaded(api, png(), "p.png")]
    thread, _ = thread_services.ensure_thread(user, uuid.uuid4(), name="t")
    monkeypatch.setattr(storage, "read_bytes", lambda key: pytest.fail(f"read {key}"))
    writes: list[str] = []
    save = storage.save_bytes

    def counted_save(prefix: str, name: str, data: bytes) -> str:
        writes.append(prefix)
        return save(prefix, name, data)

    monkeypatch.setattr(storage, "save_bytes", counted_save)
    for _ in range(3):
        attach(user, thread.pk, ids)
    assert writes == [shared_files.upload_key_prefix(user.pk, ids[1])]


def test_on_messages_elements_read_their_bytes_only_when_used(api, user, monkeypatch):
    """``message.elements`` of a send naming uploads: building them reads no file; the
    first use of ``content`` reads it (once), ``read_content`` reads without keeping it."""
    from media_app import storage
    from sessions_app.chat.elements import from_record

    thread, _ = thread_services.ensure_thread(user, uuid.uuid4(), name="t")
    [record] = attach(user, thread.pk, [uploaded(api, pdf(), "r.pdf")])
    reads: list[str] = []
    read = storage.read_bytes

    def counted_read(key: str) -> bytes:
        reads.append(key)
        return read(key)

    monkeypatch.setattr(storage, "read_bytes", counted_read)
    element = from_record(record)
    assert reads == [] and element.size_bytes == len(pdf()) and element.path
    assert asyncio.run(element.read_content()) == pdf() and len(reads) == 1
    assert element.content == pdf() and element.content == pdf()
    assert reads == [record.storage_key] * 2


def test_an_engine_send_takes_its_photo_uploads_for_itself(api, user):
    """The engine runtime copies a photo into its message's transcript: an upload goes into
    one send (its resends included), so every copy was paid for by an upload in the quota."""
    from media_app.images import ImageRejected
    from media_app.services import blocks_for_uploads

    first, second = uploaded(api, png(), "a.png"), uploaded(api, png(rgb=(1, 2, 3)), "b.png")
    send, another = uuid.uuid4(), uuid.uuid4()
    assert len(blocks_for_uploads(user, [first], send)) == 1
    assert len(blocks_for_uploads(user, [first], send)) == 1  # a resend of the same send
    with pytest.raises(ImageRejected, match=f"upload {first} was sent in another message already"):
        blocks_for_uploads(user, [second, first], another)
    # All or none: the refused send took neither.
    assert Upload.objects.get(pk=second).sent_in is None
    assert len(blocks_for_uploads(user, [second], another)) == 1
    assert set(Upload.objects.values_list("sent_in", flat=True)) == {send, another}
