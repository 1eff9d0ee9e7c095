"""``chat.User``: who is chatting, as Chainlit names it (``identifier``, ``display_name``,
``metadata``).

Tether's users are Django users; ``chat.User`` is how an app's auth callbacks name one
and how ``chat.context.session.user`` shows the signed-in one.
"""

from dataclasses import dataclass, field
from typing import Any


@dataclass
class User:
    identifier: str
    display_name: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, account: Any) -> "User":
        """The ``chat.User`` of a Django user: its username and full name."""
        name = account.get_full_name() if hasattr(account, "get_full_name") else ""
        return cls(identifier=account.get_username(), display_name=name or None)
