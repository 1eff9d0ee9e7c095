"""The ids of the conversation whose work is running, bound to every log line it writes.

One conversation's work crosses tasks, database threads and processes; a log line that says
which session, thread, turn and send it belongs to can be followed across all of them (grep
one id in every process's log). The ids live in context variables: a turn binds them where it
starts (``bind``), and the tasks and database calls it starts inherit them (asyncio copies the
context into a new task, asgiref's ``sync_to_async`` into its thread). ``ConversationIds``, a
logging filter on the console handler, copies them onto each record, where the JSON formatter
(``chatproject.log_format``) writes them; the text format ignores them.
"""

import logging
import os
from contextvars import ContextVar, Token
from typing import Any

# The names a record carries, in the order the JSON line writes them.
FIELDS = ("session", "thread", "turn", "send")

_ids: ContextVar[dict[str, str] | None] = ContextVar("tether_log_ids", default=None)


def bind(**ids: Any) -> Token[dict[str, str] | None]:
    """Add ids (``session=``, ``thread=``, ``turn=``, ``send=``) to the current context, over
    any bound before; ``unbind`` with the token restores the ones before."""
    merged = {**(_ids.get() or {}), **{name: str(value) for name, value in ids.items() if value is not None}}
    return _ids.set(merged)


def unbind(token: Token[dict[str, str] | None]) -> None:
    _ids.reset(token)


def bound() -> dict[str, str]:
    """The ids bound in the current context."""
    return dict(_ids.get() or {})


class ConversationIds(logging.Filter):
    """Puts the process id and the bound conversation ids on every record (keeps them all)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.tether_ids = _ids.get() or {}
        record.tether_process = _process_name()
        return True


def _process_name() -> str:
    """This process: its pid, and the mailbox address once it has one (what claims name)."""
    return _process.get("name") or str(os.getpid())


_process: dict[str, str] = {}


def name_process(address: str) -> None:
    """The process's mailbox address (``sessions_app.mailbox``), for the ``process`` field."""
    _process["name"] = f"{os.getpid()}:{address}"
