"""Stored files that back several rows: an upload and the elements of every message that named
it share the upload's one file instead of each keeping a copy (a copy per send made 27 MB of
quota into 270 MB of files in ten sends). A file is deleted when the last row using it goes:
an element removed or its thread deleted, or the upload purged (``release``).

A photo upload keeps its bytes in its row; the first send naming it writes them to one file
under the upload's key prefix (``photo_key_prefix``), which later sends find and share.
"""

import uuid

from media_app import storage
from media_app.models import Element, Upload


def upload_key_prefix(owner_id: int, upload_id: uuid.UUID) -> str:
    """Where an upload's file lives (a file upload's own, or a photo's file once a send names it)."""
    return f"uploads/{owner_id}/{upload_id}"


def is_used(key: str) -> bool:
    """Whether an upload or an element still names ``key``."""
    return Element.objects.filter(storage_key=key).exists() or Upload.objects.filter(storage_key=key).exists()


def release(key: str) -> None:
    """Delete ``key``'s file unless a row still uses it (call it once the row that let go of it
    is deleted or changed)."""
    if key and not is_used(key):
        storage.delete_key(key)


def photo_file_key(upload: Upload) -> str:
    """The key of a photo upload's file: the one an earlier element made from it, else a new
    file written now from the row's bytes (read here once, not on every send)."""
    prefix = upload_key_prefix(upload.owner_id, upload.pk)
    shared = (
        Element.objects.filter(owner_id=upload.owner_id, storage_key__startswith=f"{prefix}/")
        .values_list("storage_key", flat=True)
        .first()
    )
    if shared:
        return shared
    data = Upload.objects.filter(pk=upload.pk).values_list("data", flat=True).get()
    return storage.save_bytes(prefix, upload.name or "image", bytes(data))
