"""The one way element and upload bytes are written, read and deleted: Django's storage API
under the ``tether_elements`` alias (``STORAGES`` in settings), so that the filesystem default
and any django-storages backend behave the same. Keys are made here, never from a name alone:
``<prefix>/<a safe version of the name>``, and the storage may change the name to keep it free.
"""

import logging
import re

from django.core.files.base import ContentFile
from django.core.files.storage import Storage, storages

logger = logging.getLogger(__name__)

ALIAS = "tether_elements"


def backend() -> Storage:
    return storages[ALIAS]


def safe_name(name: str) -> str:
    """A file name fit for a storage key: letters, digits, dots, dashes and underscores."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", name.rsplit("/", 1)[-1].rsplit("\\", 1)[-1]).strip("._")
    return cleaned[:100] or "file"


def save_bytes(prefix: str, name: str, data: bytes) -> str:
    """Store ``data``; returns the key it was stored under."""
    return backend().save(f"{prefix}/{safe_name(name)}", ContentFile(data))


def read_bytes(key: str) -> bytes:
    with backend().open(key, "rb") as stored:
        data: bytes = stored.read()
    return data


def local_path(key: str) -> str | None:
    """A path on this machine to a stored file, when the storage has one (the filesystem;
    None for a remote backend)."""
    if not key:
        return None
    try:
        return str(backend().path(key))
    except NotImplementedError:
        return None


def delete_key(key: str) -> None:
    """Delete a stored file; a file already gone is not an error (deletes may repeat)."""
    if not key:
        return
    try:
        backend().delete(key)
    except Exception:
        logger.exception("could not delete %s from the %s storage", key, ALIAS)
