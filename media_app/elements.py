"""Elements: files attached to a message or step, kept in the elements storage.

One verb per change: ``create_element`` (store the bytes, write the row), ``remove_element``,
``delete_thread_elements`` (a thread was deleted), ``attach_uploads`` (a user's uploads named
by a send become elements of its user step); reads: ``element_dict`` (Chainlit's ElementDict,
its ``url`` the owner-checked endpoint), ``thread_element_dicts``, ``read_element``.
"""

import hashlib
import mimetypes
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.urls import reverse
from django.utils import timezone

from chatproject import page_urls
from media_app import images, shared_files, storage
from media_app.models import Element, Upload
from threads_app.models import Thread

# Element ids of a user's uploads attached to a send: the same send and upload, the same id.
UPLOAD_ELEMENT_NAMESPACE = uuid.UUID("6f1d7a52-3c1e-4b7e-9c2a-0e7b1f5d2a10")
DEFAULT_MIME: dict[str, str] = {
    Element.Type.TEXT.value: "text/plain",
    Element.Type.PDF.value: "application/pdf",
    Element.Type.PLOTLY.value: "application/json",
}


class ElementRejected(ValueError):
    """An element that cannot be kept; the message says why."""


class ElementNotFound(Exception):
    """No element with this id for this caller."""


def max_element_bytes() -> int:
    return int(settings.ELEMENT_MAX_BYTES)


def element_url(element: Element) -> str:
    return element.url or reverse("element", args=[element.pk])


def element_dict(element: Element) -> dict[str, Any]:
    """The ElementDict clients receive (Chainlit's field names). ``objectKey`` and
    ``chainlitKey`` stay empty: the storage key is never shown; ``bytes`` is Tether's own."""
    return {
        "id": str(element.pk),
        "threadId": str(element.thread_id),
        "type": element.type,
        "chainlitKey": None,
        "url": element_url(element),
        "objectKey": None,
        "name": element.name,
        "display": element.display,
        "size": element.image_size or None,
        "language": element.language or None,
        "page": element.page,
        "autoPlay": None,
        "playerConfig": None,
        "forId": str(element.for_id) if element.for_id else None,
        "mime": element.mime or None,
        "props": element.props or {},
        "bytes": element.size,
    }


def _mime_of(type_: str, name: str, mime: str | None, data: bytes | None) -> str:
    if type_ == Element.Type.IMAGE and data:
        sniffed = images.sniff(data[:16])
        if sniffed is None:
            raise ElementRejected(f"The image {name!r} is not a {images.ALLOWED_TEXT} image.")
        return sniffed
    return mime or DEFAULT_MIME.get(type_) or mimetypes.guess_type(name)[0] or "application/octet-stream"


def create_element(
    *,
    owner_id: int,
    thread_id: uuid.UUID,
    element_id: uuid.UUID,
    type: str,
    name: str,
    display: str = Element.Display.INLINE,
    for_id: uuid.UUID | None = None,
    data: bytes | None = None,
    url: str = "",
    mime: str | None = None,
    image_size: str = "",
    language: str = "",
    page: int | None = None,
    props: dict[str, Any] | None = None,
    shared_key: str = "",
    shared_size: int = 0,
) -> Element:
    """Store an element's bytes (or keep its URL) and write its row. Sending the same id
    again replaces it (its old bytes are deleted once the new ones are in, unless another row
    shares them). ``shared_key`` (with its ``shared_size``) names a file already stored, an
    upload's (``shared_files``), which the element uses instead of a copy of its own."""
    if type not in Element.Type.values:
        raise ElementRejected(f"Unknown element type {type!r}.")
    if display not in Element.Display.values:
        raise ElementRejected(f"display must be inline, side or page, not {display!r}.")
    if data is None and not url and not shared_key:
        raise ElementRejected(f"The element {name!r} has no content, path or url.")
    if data is None and not shared_key and not page_urls.is_link_url(url):
        # The page puts it in an href or src: no javascript: or data: URLs, no //host.
        raise ElementRejected(f"The url of {name!r} must be http(s) or a path on this server.")
    if data is not None and len(data) > max_element_bytes():
        raise ElementRejected(
            f"The element {name!r} is {images.human_size(len(data))}; "
            f"the limit is {images.human_size(max_element_bytes())}."
        )
    existing = Element.objects.filter(pk=element_id).first()
    if existing is not None and existing.owner_id != owner_id:
        raise ElementRejected(f"The element id {element_id} is taken.")
    fields: dict[str, Any] = {
        "thread_id": thread_id,
        "for_id": for_id,
        "owner_id": owner_id,
        "type": type,
        "name": name[:255] or type,
        "display": display,
        "mime": (mime if shared_key and mime else _mime_of(type, name, mime, data))[:100],
        "size": len(data) if data is not None else shared_size,
        "url": url if data is None and not shared_key else "",
        "image_size": image_size,
        "language": language[:40],
        "page": page,
        "props": props or {},
        "storage_key": shared_key,
    }
    if data is not None:
        fields["storage_key"] = storage.save_bytes(f"elements/{thread_id}/{element_id}", name, data)
    try:
        with transaction.atomic():
            element, _created = Element.objects.update_or_create(pk=element_id, defaults=fields)
    except BaseException:
        shared_files.release(fields["storage_key"])
        raise
    if existing is not None and existing.storage_key and existing.storage_key != element.storage_key:
        shared_files.release(existing.storage_key)
    return element


def remove_element(owner_id: int, element_id: uuid.UUID) -> Element | None:
    """Delete an element and its bytes; the removed element (None if there was none)."""
    element = Element.objects.filter(pk=element_id, owner_id=owner_id).first()
    if element is not None:
        element.delete()  # the file goes with it (``element_signals``)
    return element


def delete_thread_elements(thread_id: uuid.UUID) -> int:
    """Delete a (deleted) thread's elements and their bytes; how many."""
    count = 0
    for element in Element.objects.filter(thread_id=thread_id):
        element.delete()
        count += 1
    return count


def purge_orphans(older_than: timedelta) -> int:
    """Delete elements (and files) older than ``older_than`` whose thread was never created:
    sent in ``on_chat_start`` by a chat that ended before its first message. How many."""
    orphans = Element.objects.filter(created_at__lt=timezone.now() - older_than).exclude(
        Exists(Thread.objects.filter(pk=OuterRef("thread_id")))
    )
    count = 0
    for element in orphans:
        element.delete()
        count += 1
    return count


def _visible(owner_id: int) -> Any:
    """The caller's elements whose thread is not deleted (a thread row may not exist yet)."""
    deleted = Thread.objects.filter(pk=OuterRef("thread_id"), deleted_at__isnull=False)
    return Element.objects.filter(owner_id=owner_id).exclude(Exists(deleted))


def thread_element_dicts(thread_id: Any, for_ids: list[Any] | None = None) -> list[dict[str, Any]]:
    """A thread's elements as ElementDicts, oldest first (only those of ``for_ids`` if given)."""
    elements = Element.objects.filter(thread_id=thread_id)
    if for_ids is not None:
        elements = elements.filter(for_id__in=for_ids)
    return [element_dict(element) for element in elements.order_by("created_at", "pk")]


def owned_element_dict(owner_id: int, thread_id: uuid.UUID, element_id: uuid.UUID) -> dict[str, Any] | None:
    """The ElementDict of one of the caller's elements in that thread (not deleted), or None."""
    element = _visible(owner_id).filter(pk=element_id, thread_id=thread_id).first()
    return None if element is None else element_dict(element)


def elements_for(owner_id: int, for_id: uuid.UUID) -> list[Element]:
    return list(_visible(owner_id).filter(for_id=for_id).order_by("created_at", "pk"))


def element_bytes(element: Element) -> bytes:
    return storage.read_bytes(element.storage_key)


def element_path(element: Element) -> str | None:
    """A local path to the element's bytes, when the storage has one (the filesystem)."""
    return storage.local_path(element.storage_key)


@dataclass(frozen=True)
class StoredElement:
    element: Element
    data: bytes
    etag: str


def read_element(owner_id: int, element_id: uuid.UUID) -> StoredElement:
    """An element's bytes, if the caller owns it and its thread is not deleted."""
    element = _visible(owner_id).filter(pk=element_id).first()
    if element is None or not element.storage_key:
        raise ElementNotFound(str(element_id))
    try:
        data = element_bytes(element)
    except OSError:
        raise ElementNotFound(str(element_id)) from None
    # The bytes behind an id change only when the app sends the same id again (a new key).
    etag = hashlib.sha256(f"{element.pk}:{element.storage_key}:{element.size}".encode()).hexdigest()[:40]
    return StoredElement(element, data, f'"{etag}"')


def upload_element_id(for_id: uuid.UUID, upload_id: uuid.UUID) -> uuid.UUID:
    return uuid.uuid5(UPLOAD_ELEMENT_NAMESPACE, f"{for_id}:{upload_id}")


def check_uploads(owner_id: int, upload_ids: list[uuid.UUID]) -> None:
    """Refuse a send naming uploads that are not the caller's (before anything is recorded)."""
    found = set(Upload.objects.filter(owner_id=owner_id, pk__in=upload_ids).values_list("pk", flat=True))
    missing = [str(i) for i in upload_ids if i not in found]
    if missing:
        raise ElementRejected(f"fileReferences: no upload {', '.join(missing)} of yours.")


def attach_uploads(
    owner_id: int, thread_id: uuid.UUID, for_id: uuid.UUID, upload_ids: list[uuid.UUID]
) -> list[Element]:
    """Make the caller's uploads elements of the user step ``for_id``, sharing each upload's
    stored file (``shared_files``): no bytes are copied or read, except a photo's once, into
    the one file every element made from it shares. The upload row is purged after a while;
    the file stays while an element uses it. Repeating it is harmless."""
    found = {u.id: u for u in Upload.objects.filter(owner_id=owner_id, pk__in=upload_ids).defer("data")}
    missing = [str(i) for i in upload_ids if i not in found]
    if missing:
        raise ElementRejected(f"fileReferences: no upload {', '.join(missing)} of yours.")
    attached = []
    for upload_id in upload_ids:
        element_id = upload_element_id(for_id, upload_id)
        existing = Element.objects.filter(pk=element_id, owner_id=owner_id).first()
        if existing is not None:
            attached.append(existing)
            continue
        upload = found[upload_id]
        key = upload.storage_key or shared_files.photo_file_key(upload)
        is_photo = upload.content_type in images.ALLOWED_TYPES
        attached.append(
            create_element(
                owner_id=owner_id,
                thread_id=thread_id,
                element_id=element_id,
                type=Element.Type.IMAGE
                if is_photo
                else (Element.Type.PDF if upload.content_type == "application/pdf" else Element.Type.FILE),
                name=upload.name or ("image" if is_photo else "file"),
                for_id=for_id,
                mime=upload.content_type,
                shared_key=key,
                shared_size=upload.size,
            )
        )
    return attached
