"""After a stall: the sockets this process still holds get their session records back.

While this process stalled past its lease, another may have taken it for dead and detached
its sockets' session records (``records.detach_dead_sockets``), which would then expire and
get ``on_chat_end`` while their clients are still connected here. So the first recovery pass
after a lapse of this process's beats (``heartbeat.lapses`` moved) attaches them again, and
closes a socket whose session ended or moved to another socket meanwhile, so that its client
connects again (and resumes its thread). One read while nothing was detached; no work at all
while the beats are regular.
"""

import logging
import uuid

from sessions_app import records
from sessions_app.database import database_sync_to_async
from sessions_app.emitter import EmittingSocket, local_sockets
from sessions_app.mailbox import mailbox
from sessions_app.processes import heartbeat

logger = logging.getLogger(__name__)


class StallReattachment:
    """The heartbeat's ``lapses`` this process last reattached its sockets for."""

    def __init__(self) -> None:
        self.seen = 0

    async def after_stall(self) -> int:
        """Reattach (or close) this process's sockets if its beats lapsed since the last
        call; returns how many sockets were closed."""
        lapses = heartbeat.lapses
        if lapses == self.seen:
            return 0
        sockets: dict[uuid.UUID, EmittingSocket] = {
            session_id: socket for session_id, socket in local_sockets.items() if not socket.closed
        }
        channels = {session_id: socket.channel_name for session_id, socket in sockets.items()}
        lost = await database_sync_to_async(records.reattach_sockets)(await mailbox.channel(), channels)
        self.seen = lapses
        for session_id, socket in sockets.items():
            if local_sockets.get(session_id) is not socket or socket.closed:
                # It went away while the records were read: it is disconnected after all.
                await database_sync_to_async(records.mark_disconnected)(session_id, channels[session_id])
        for session_id in lost:
            logger.warning(
                "session %s ended or moved while this process stalled; closing its socket", session_id
            )
            await sockets[session_id].go_away()
        return len(lost)

    def clear(self) -> None:
        self.seen = heartbeat.lapses


stall_reattachment = StallReattachment()
