"""What the app offers an empty chat: its starters and chat profiles, read for one user.

The app's ``set_starters`` / ``set_chat_profiles`` hooks are the app's code, so what they
return is checked here before it reaches a page or a session: a hook that raises, hangs past
``HOOK_TIMEOUT`` or returns something else than a list of ``chat.Starter`` / ``chat.ChatProfile``
is logged with the reason and counts as an empty list (the page then shows none, it does not
fail); items that are not storable are dropped one by one, and the lists are capped.

A chat's profile is chosen when its session is created (``choose_profile``): a name the app
does not offer, or none, falls back to the default profile, as Chainlit's client does.
"""

import asyncio
import dataclasses
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from django.conf import settings
from django.contrib.auth.models import User

from chatproject import page_urls
from sessions_app.chat.hooks import Hook, load_app
from sessions_app.chat.profiles import ChatProfile, Starter

logger = logging.getLogger(__name__)

HOOK_TIMEOUT = 5.0  # seconds an app's set_starters / set_chat_profiles may take
MAX_STARTERS = 20
MAX_PROFILES = 20
MAX_NAME_CHARS = 255  # a profile name is stored with the session and the thread
MAX_LABEL_CHARS = 200
MAX_DESCRIPTION_CHARS = 10_000
MAX_ICON_CHARS = 2048

T = TypeVar("T")


class Unusable(ValueError):
    """An item the app returned cannot be shown; the message says why."""


def _text(value: Any, what: str, limit: int, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str) or (not value.strip() and not optional):
        raise Unusable(f"{what} must be a non-empty string")
    if len(value) > limit:
        raise Unusable(f"{what} is longer than {limit} characters")
    if "\x00" in value:
        raise Unusable(f"{what} contains a NUL character")


def _icon(icon: Any, what: str) -> str | None:
    """A usable icon, or None: the page loads images from this server only, so an icon that
    is not a path on it (``https://...``, ``//host``, ``/\\host``) is dropped, with a log line,
    and the item is shown without it."""
    _text(icon, "icon", MAX_ICON_CHARS, optional=True)
    if icon is not None and not page_urls.is_server_path(icon):
        logger.warning("%s: icon %r is dropped: it must be a path on this server", what, icon[:200])
        return None
    return icon  # type: ignore[no-any-return]  # _text checked it is a str or None


def _check_starter(starter: Any) -> Starter:
    if not isinstance(starter, Starter):
        raise Unusable(f"{type(starter).__name__} is not a chat.Starter")
    _text(starter.label, "label", MAX_LABEL_CHARS)
    _text(starter.message, "message", settings.MAX_MESSAGE_CHARS)
    icon = _icon(starter.icon, f"starter {starter.label!r}")
    return starter if icon == starter.icon else dataclasses.replace(starter, icon=icon)


def _check_profile(profile: Any) -> ChatProfile:
    if not isinstance(profile, ChatProfile):
        raise Unusable(f"{type(profile).__name__} is not a chat.ChatProfile")
    _text(profile.name, "name", MAX_NAME_CHARS)
    _text(profile.markdown_description, "markdown_description", MAX_DESCRIPTION_CHARS, optional=True)
    _text(profile.display_name, "display_name", MAX_LABEL_CHARS, optional=True)
    icon = _icon(profile.icon, f"profile {profile.name!r}")
    starters = None
    if profile.starters is not None:
        starters = _checked(
            profile.starters, _check_starter, f"starters of profile {profile.name!r}", MAX_STARTERS
        )
    return ChatProfile(
        name=profile.name,
        markdown_description=profile.markdown_description or "",
        icon=icon,
        default=bool(profile.default),
        starters=starters,
        display_name=profile.display_name,
    )


def _checked(items: Any, check: Callable[[Any], T], what: str, limit: int) -> list[T]:
    """The usable items of what the app returned, at most ``limit`` of them."""
    if items is None:
        return []
    if not isinstance(items, list | tuple):
        logger.error("%s: the app returned %s, not a list; none are shown", what, type(items).__name__)
        return []
    usable: list[T] = []
    for index, item in enumerate(items):
        try:
            usable.append(check(item))
        except Unusable as reason:
            logger.error("%s: item %d is dropped: %s", what, index, reason)
    if len(usable) > limit:
        logger.warning("%s: the app returned %d, only the first %d are shown", what, len(usable), limit)
    return usable[:limit]


async def _call(hook: Hook, user: User) -> Any:
    """Call an app's hook with as many of (user, language) as it takes, as Chainlit does."""
    arguments: tuple[Any, ...] = (user, settings.LANGUAGE_CODE)
    try:
        parameters = list(inspect.signature(hook).parameters.values())
    except (TypeError, ValueError):
        parameters = []  # a callable without a signature: no arguments
    if not any(p.kind is p.VAR_POSITIONAL for p in parameters):
        positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        arguments = arguments[: len(positional)]
    return await asyncio.wait_for(hook(*arguments), HOOK_TIMEOUT)


async def _read(name: str, user: User) -> Any:
    """What the app's hook ``name`` returns for ``user``; None when it has none or it failed."""
    hook: Hook | None = getattr(load_app(), name)
    if hook is None:
        return None
    try:
        return await _call(hook, user)
    except TimeoutError:
        logger.error("%s of the chat app took longer than %s s; none are shown", name, HOOK_TIMEOUT)
    except Exception:
        logger.exception("%s of the chat app failed; none are shown", name)
    return None


async def app_starters(user: User) -> list[Starter]:
    """The app's own starters for ``user`` (``@chat.set_starters``), checked and capped."""
    return _checked(await _read("set_starters", user), _check_starter, "set_starters", MAX_STARTERS)


async def app_chat_profiles(user: User) -> list[ChatProfile]:
    """The app's chat profiles for ``user`` (``@chat.set_chat_profiles``), checked, capped,
    each name once."""
    profiles = _checked(
        await _read("set_chat_profiles", user), _check_profile, "set_chat_profiles", MAX_PROFILES
    )
    unique: dict[str, ChatProfile] = {}
    for profile in profiles:
        if profile.name in unique:
            logger.error("set_chat_profiles: a second profile named %r is dropped", profile.name)
        else:
            unique[profile.name] = profile
    return list(unique.values())


def default_profile(profiles: list[ChatProfile]) -> ChatProfile | None:
    """The profile a new chat starts with: the first marked ``default``, else the first."""
    return next((p for p in profiles if p.default), profiles[0] if profiles else None)


def choose_profile(profiles: list[ChatProfile], requested: str) -> str:
    """The profile a new chat gets when its client asks for ``requested``. With no profiles
    the name is kept as given (the app reads it as it likes); otherwise a name the app does
    not offer, or none, falls back to the default profile."""
    if not profiles or any(p.name == requested for p in profiles):
        return requested
    fallback = default_profile(profiles)
    assert fallback is not None  # profiles is not empty
    if requested:
        logger.info("chat profile %r is not offered; the chat starts with %r", requested, fallback.name)
    return fallback.name


async def resolve_chat_profile(user: User, requested: str) -> str:
    """The profile a new session of ``user`` asking for ``requested`` gets (``choose_profile``)."""
    if load_app().set_chat_profiles is None:
        return requested
    return choose_profile(await app_chat_profiles(user), requested)


@dataclass(frozen=True)
class ProjectSettings:
    """What the page reads before the first message (Chainlit's project settings, in part)."""

    chat_profiles: list[ChatProfile]
    chat_profile: str
    starters: list[Starter]

    def to_dict(self) -> dict[str, Any]:
        return {
            "chatProfiles": [p.to_dict() for p in self.chat_profiles],
            "chatProfile": self.chat_profile,
            "starters": [s.to_dict() for s in self.starters],
        }


async def project_settings(user: User, requested_profile: str = "") -> ProjectSettings:
    """The profiles the app offers ``user``, the one a chat asking for ``requested_profile``
    gets, and the starters to show: that profile's when it has its own, else the app's."""
    profiles = await app_chat_profiles(user)
    chosen = choose_profile(profiles, requested_profile)
    profile = next((p for p in profiles if p.name == chosen), None)
    if profile is not None and profile.starters is not None:
        starters = profile.starters
    else:
        starters = await app_starters(user)
    return ProjectSettings(chat_profiles=profiles, chat_profile=chosen, starters=starters)
