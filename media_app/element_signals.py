"""Where stored element bytes are deleted: with their row (whatever deletes it: a removal, a
thread or user deleted for good, the admin) and with the elements of a thread the user deletes
(a soft delete keeps the transcript rows, but the files go at once); a file another row still
shares (an upload's, ``shared_files``) stays."""

from typing import Any

from media_app import shared_files
from media_app.models import Element


def delete_stored_file(sender: Any, instance: Element, **_kwargs: Any) -> None:
    shared_files.release(instance.storage_key)


def on_thread_deleted(sender: Any, thread_id: Any, **_kwargs: Any) -> None:
    from media_app.elements import delete_thread_elements

    delete_thread_elements(thread_id)
