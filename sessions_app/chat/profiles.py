"""``chat.Starter`` and ``chat.ChatProfile``: what an empty chat offers before its first message.

An app declares them with ``@chat.set_starters`` and ``@chat.set_chat_profiles``; the page reads
them from ``GET /api/project/settings`` (``sessions_app.app_settings``), shows the starters as
buttons and the profiles as a picker, and connects with the chosen profile, which every hook of
the chat then reads as ``chat.user_session.get("chat_profile")``.
"""

from dataclasses import KW_ONLY, dataclass
from typing import Any


@dataclass(frozen=True)
class Starter:
    """A suggested first message: a button labelled ``label`` that sends ``message``.
    ``icon`` is keyword-only (Chainlit's third field is a command, which Tether has not)."""

    label: str
    message: str
    _: KW_ONLY
    icon: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "message": self.message, "icon": self.icon}


@dataclass(frozen=True)
class ChatProfile:
    """A way the app can answer, chosen before the first message and kept by the thread.

    ``starters`` (when not None) replace the app's own starters while this profile is chosen;
    ``default`` marks the profile a new chat starts with (else the first one). The fields after
    ``icon`` are keyword-only, so that a positional call in Chainlit's order (``display_name``
    fourth) fails instead of setting another field.
    """

    name: str
    markdown_description: str
    icon: str | None = None
    _: KW_ONLY
    display_name: str | None = None
    default: bool = False
    starters: list[Starter] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "display_name": self.display_name,
            "markdown_description": self.markdown_description,
            "icon": self.icon,
            "default": self.default,
            "starters": None if self.starters is None else [s.to_dict() for s in self.starters],
        }
