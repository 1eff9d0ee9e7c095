"""Uploads in, photos out: storing an upload, turning uploads named by a message into image
blocks, and reading one photo back by its reference."""

import base64
import binascii
import hashlib
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import Model, Q, Sum
from django.db.models.fields.json import KT
from django.utils import timezone

from media_app import files, images, shared_files, storage
from media_app.blocks import MediaRef, find_image
from media_app.models import Upload
from media_app.stripping import StrippedJSON, Unreadable, load_stripped
from threads_app.models import AcceptedMessage, Step, Thread

# --- uploads ------------------------------------------------------------------------------


def quota_bytes() -> int:
    return int(settings.UPLOAD_QUOTA_BYTES)


def stored_bytes(owner: User) -> int:
    return Upload.objects.filter(owner=owner).aggregate(total=Sum("size"))["total"] or 0


def store_upload(owner: User, file: "UploadedFile[bytes]") -> Upload:  # generic only in the stubs
    """Validate an uploaded file and keep it, if the owner's uploads stay within
    ``UPLOAD_QUOTA_BYTES``. A photo (size, type by its first bytes, pixels by its header) is
    kept in the row; another file the settings allow (``media_app.files``) in the elements
    storage.

    The owner's row is locked while the quota is checked and the upload written, so uploads
    sent at the same time cannot each see room for themselves.
    """
    file.seek(0)
    head = file.read(16)
    file.seek(0)
    name = (file.name or "")[:255]
    if files.only_images_allowed() or (images.sniff(head) and files.is_allowed(images.sniff(head) or "")):
        images.check_size(file.size or 0)
        content_type = images.check_type(head)
        data = file.read()
        images.check_size(len(data))
        images.check_pixels(data, content_type)
        return _keep_upload(owner, name, content_type, data, stored=False)
    if (file.size or 0) > files.max_upload_bytes():
        raise files.FileRejected(
            f"The file is {images.human_size(file.size or 0)}; the limit is "
            f"{images.human_size(files.max_upload_bytes())}."
        )
    data = file.read()
    content_type = files.check_upload(data, name)
    return _keep_upload(owner, name, content_type, data, stored=True)


def _keep_upload(owner: User, name: str, content_type: str, data: bytes, *, stored: bool) -> Upload:
    with transaction.atomic():
        get_user_model().objects.select_for_update().filter(pk=owner.pk).first()
        used = stored_bytes(owner)
        if used + len(data) > quota_bytes():
            raise images.ImageRejected(
                f"Your uploads already take {images.human_size(used)} of your "
                f"{images.human_size(quota_bytes())} quota; this one ({images.human_size(len(data))}) "
                "does not fit. Uploads are deleted after a while; try again later."
            )
        upload = Upload(owner=owner, content_type=content_type, size=len(data), name=name)
        if stored:
            upload.storage_key = storage.save_bytes(
                shared_files.upload_key_prefix(owner.pk, upload.id), name, data
            )
        else:
            upload.data = data
        try:
            upload.save(force_insert=True)
        except BaseException:
            if upload.storage_key:
                storage.delete_key(upload.storage_key)
            raise
        return upload


def upload_bytes(upload: Upload) -> bytes:
    """The bytes of an upload, wherever they are kept (the row for a photo, else the storage)."""
    if upload.storage_key:
        return storage.read_bytes(upload.storage_key)
    return bytes(upload.data)


def upload_path(upload: Upload) -> str | None:
    """A local path to an upload's bytes: a file that is not a photo, in a filesystem storage
    (a photo is kept in its row, and has none)."""
    return storage.local_path(upload.storage_key)


def purge_uploads(older_than: timedelta) -> int:
    """Delete the uploads created more than ``older_than`` ago; how many were deleted.

    No message depends on an upload row: an engine-app send copies a photo into the message's
    own record when it is accepted (``blocks_for_uploads``), and a hooks-API send's elements
    share the upload's file (``shared_files``), which stays while an element uses it.
    """
    old = Upload.objects.filter(created_at__lt=timezone.now() - older_than)
    keys = [key for key in old.exclude(storage_key="").values_list("storage_key", flat=True)]
    deleted, _ = old.delete()
    for key in keys:
        shared_files.release(key)
    return deleted


def parse_references(references: Any) -> list[uuid.UUID]:
    """``fileReferences`` of a ``client_message``: a list of ``{"id": <upload id>}`` (or of ids)."""
    if references in (None, ""):
        return []
    if not isinstance(references, list):
        raise images.ImageRejected("fileReferences must be a list of {id} objects.")
    images.check_count(len(references))
    ids = []
    for reference in references:
        value = reference.get("id") if isinstance(reference, dict) else reference
        try:
            ids.append(uuid.UUID(str(value)))
        except (TypeError, ValueError, AttributeError):
            raise images.ImageRejected(f"fileReferences: {value!r} is not an upload id.") from None
    return ids


def blocks_for_uploads(
    owner: User, upload_ids: list[uuid.UUID], send_key: uuid.UUID | None = None
) -> list[dict[str, Any]]:
    """The image blocks of the caller's uploads, in the order named. An id that is not one of
    the caller's uploads is refused as a whole.

    With ``send_key`` (the engine-app send they go into, ``AcceptedMessage.key``) the uploads
    are claimed for that send: the message copies them into its transcript, so an upload
    another send already took is refused (upload the photo again to send it again, within the
    quota). A resend of the same send may name them again.
    """
    images.check_count(len(upload_ids))
    found = {u.id: u for u in Upload.objects.filter(owner=owner, pk__in=upload_ids)}
    missing = [str(i) for i in upload_ids if i not in found]
    if missing:
        raise images.ImageRejected(f"fileReferences: no upload {', '.join(missing)} of yours.")
    not_photos = [str(i) for i in upload_ids if found[i].storage_key]
    if not_photos:
        raise images.ImageRejected(f"fileReferences: upload {', '.join(not_photos)} is not a photo.")
    if send_key is not None:
        _claim_for_send(owner, set(upload_ids), send_key)
    return [images.block_from_bytes(bytes(found[i].data)) for i in upload_ids]


def _claim_for_send(owner: User, upload_ids: set[uuid.UUID], send_key: uuid.UUID) -> None:
    """Mark the uploads as sent in ``send_key``, all or none (one conditional UPDATE, so two
    sends naming the same upload at once cannot both take it; a refusal rolls it back)."""
    with transaction.atomic():
        free = Q(sent_in__isnull=True) | Q(sent_in=send_key)
        claimed = Upload.objects.filter(free, owner=owner, pk__in=upload_ids).update(sent_in=send_key)
        if claimed != len(upload_ids):
            taken = Upload.objects.filter(owner=owner, pk__in=upload_ids).exclude(free)
            names = ", ".join(str(pk) for pk in taken.values_list("pk", flat=True))
            raise images.ImageRejected(
                f"fileReferences: upload {names} was sent in another message already; "
                "upload the photo again to send it again."
            )


def uploads_of(owner: User, upload_ids: list[uuid.UUID], *, with_data: bool = False) -> list[Upload]:
    """The caller's uploads among ``upload_ids``, in the order named (another user's and
    unknown ids are left out). Without ``with_data`` the bytes are not read. For readers
    outside this app (``sessions_app.asks``: the files a user gives an ``AskFileMessage``)."""
    rows = Upload.objects.filter(owner=owner, pk__in=upload_ids)
    if not with_data:
        rows = rows.defer("data")
    found = {u.id: u for u in rows}
    return [found[i] for i in upload_ids if i in found]


# --- one photo back by its reference ------------------------------------------------------


class MediaNotFound(Exception):
    """No photo behind this reference for this caller."""


@dataclass(frozen=True)
class Photo:
    data: bytes
    content_type: str
    etag: str


def _uuid(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise MediaNotFound(value) from None


# Where an entry's blocks are: a transcript step, else a send not transcribed yet
# (``bootstrap().pending`` mints references to those with the message id, which is also the
# id of the user step that transcribes it).
ENTRIES: tuple[tuple[type[Model], str], ...] = ((Step, "content"), (AcceptedMessage, "images"))


def read_image(user: User, ref: MediaRef) -> Photo:
    """The photo behind a reference, if the caller owns its thread.

    Reads the one entry twice, neither time whole: first its stripped skeleton (the database
    takes the payloads out, as on a history read) to find the ``index``-th image block with
    the shared enumeration, then that block's payload alone, by its path.
    """
    thread_id, entry_id = _uuid(ref.thread_id), _uuid(ref.entry_id)
    if not Thread.objects.filter(pk=thread_id, owner=user, deleted_at__isnull=True).exists():
        raise MediaNotFound(str(ref))
    for model, column in ENTRIES:
        rows = model._default_manager.filter(pk=entry_id, thread_id=thread_id)  # noqa: SLF001 - Django's documented API
        found = list(rows.values_list(StrippedJSON(column), flat=True)[:1])
        if found:
            skeleton = found[0]
            break
    else:
        raise MediaNotFound(str(ref))
    try:
        blocks = load_stripped(skeleton)
    except Unreadable:
        raise MediaNotFound(str(ref)) from None
    # The same enumeration that minted the reference; a block without a payload has no photo.
    image = find_image(blocks, ref.index)
    if image is None or image.payload is None:
        raise MediaNotFound(str(ref))
    lookup = "__".join([column, *(str(part) for part in image.payload_path)])
    payload = rows.values_list(KT(lookup), flat=True).first()
    if not payload:
        raise MediaNotFound(str(ref))
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise MediaNotFound(str(ref)) from None
    content_type = images.sniff(data[:16])
    if content_type is None:
        raise MediaNotFound(str(ref))
    return Photo(data, content_type, f'"{hashlib.sha256(data).hexdigest()[:40]}"')
