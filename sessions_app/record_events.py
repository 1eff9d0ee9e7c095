"""Ownership follows the record: when a thread is deleted or a user deactivated, what is live
on it ends. The sockets showing the thread (its bus) or belonging to the user (the user's
group) are told and closed; running turns on the thread are stopped by the consumers that
receive the news (``ChatConsumer.thread_deleted``, ``user_deactivated``)."""

import logging
import uuid
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from sessions_app.thread_bus import thread_group

logger = logging.getLogger(__name__)


def user_group(user_id: Any) -> str:
    return f"user.{user_id}"


def _publish(group: str, message: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(group, message)
    except Exception:  # the channel layer is down: the record is changed all the same
        logger.warning("could not announce %s to %s", message["type"], group)


def on_thread_deleted(sender: Any, thread_id: uuid.UUID, **_kwargs: Any) -> None:
    _publish(thread_group(thread_id), {"type": "thread.deleted", "thread": str(thread_id)})


def on_user_saved(sender: Any, instance: Any, created: bool = False, **_kwargs: Any) -> None:
    if not created and not instance.is_active:
        _publish(user_group(instance.pk), {"type": "user.deactivated"})
