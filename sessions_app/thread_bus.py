"""A thread's bus: the channel-layer group of every socket showing the thread.

Other tabs learn of a send the moment it is accepted (``chat-user-message``), and, for
hooks-API apps, of its user step when its turn begins and of everything the session shows
after (``LiveSession``), while another socket shows the thread (``watched_by_others``). What a
session publishes leaves out its own socket, which had it directly: with Redis, nothing for it
goes through Redis wherever it is (``leave_out``). Publishing is best effort: the records are
already committed, so a channel layer that is down costs other tabs a live update (they read
it from the history), never the send.
"""

import logging
import uuid
from typing import Any, cast

from channels.layers import BaseChannelLayer, InMemoryChannelLayer, get_channel_layer

from chatproject import tracing
from sessions_app.channel_layer import ResilientRedisChannelLayer
from sessions_app.emitter import session_group
from sessions_app.event_frames import EncodedEvent, encode_event
from threads_app.models import AcceptedMessage
from threads_app.wire import iso

logger = logging.getLogger(__name__)


def thread_group(thread_id: uuid.UUID) -> str:
    return f"thread.{thread_id.hex}"


def watched_by_others(thread_id: uuid.UUID, session_id: uuid.UUID) -> bool:
    """Whether a socket other than the session's own may show the thread. False only when the
    channel layer knows there is none: with Redis, while this process holds the group's lease
    (``group_leases``); so a thread that one tab shows costs its turns no publish, and no Redis
    call to find that out."""
    layer = get_channel_layer()
    group, own = thread_group(thread_id), session_group(session_id)
    if isinstance(layer, ResilientRedisChannelLayer):
        return not layer.has_no_member_but(group, own)
    if isinstance(layer, InMemoryChannelLayer):
        return not set(layer.groups.get(group, {})) <= set(layer.groups.get(own, {}))
    return True


async def publish_on_thread(
    thread_id: uuid.UUID, event: str, data: Any, *, skip_session: uuid.UUID | None = None
) -> None:
    """Emit ``event`` to every socket showing the thread (but the one of ``skip_session``,
    which got it directly); never raises."""
    await publish_encoded(thread_id, encode_event(event, [data]), skip_session=skip_session)


async def publish_encoded(
    thread_id: uuid.UUID, encoded: EncodedEvent, *, skip_session: uuid.UUID | None = None
) -> None:
    """``publish_on_thread`` for an event already encoded (its frame text is what each
    socket writes)."""
    message: dict[str, Any] = {"type": "thread.event", "event": encoded.event, "frame": encoded.frame}
    if skip_session is not None:
        message["skip_session"] = str(skip_session)
    message = tracing.inject(message)  # its trace, to its receivers (traces on only)
    layer = get_channel_layer()
    try:
        if skip_session is not None and isinstance(layer, ResilientRedisChannelLayer):
            # Not through Redis to the session's own socket in another process, to be dropped.
            await layer.group_send(thread_group(thread_id), message, leave_out=session_group(skip_session))
        else:
            await cast(BaseChannelLayer, layer).group_send(thread_group(thread_id), message)
    except Exception as exc:
        logger.warning("%s for thread %s not published: %r", encoded.event, thread_id, exc)


async def publish_accepted(accepted: AcceptedMessage, *, author: str, image_count: int) -> None:
    """``chat-user-message``: a send was accepted (every path publishes this one payload)."""
    await publish_on_thread(
        accepted.thread_id,
        "chat-user-message",
        {
            "threadId": str(accepted.thread_id),
            "messageId": str(accepted.client_id),
            "text": accepted.text,
            "imageCount": image_count,
            "author": author,
            "acceptedAt": iso(accepted.accepted_at),
        },
    )
