"""An example Tether app with starters and two chat profiles that answer differently.

Run it with ``CHAT_APP=examples.profiles_app make run``.

- ``set_chat_profiles`` offers two profiles: "Echo" (the default) repeats a message, "Reverse"
  spells it backwards. The page shows a picker before the first message; the chosen profile
  is kept with the thread and every hook reads it as ``chat.user_session.get("chat_profile")``.
  "Reverse" has an icon: a path on this server (the page loads images from no other origin),
  here Tether's own favicon;
- ``set_starters`` offers the app's starters, shown as buttons on an empty chat; "Reverse"
  has its own, which replace them while it is chosen;
- ``on_chat_start``, ``on_message`` and ``on_chat_resume`` answer according to the profile.
"""

from typing import Any

from django.contrib.auth.models import User

from sessions_app import chat

ECHO = "Echo"
REVERSE = "Reverse"


@chat.set_starters
async def starters(user: User) -> list[chat.Starter]:
    return [
        chat.Starter(label="Say hello", message="Hello there"),
        chat.Starter(label="Ask the time", message=f"What time is it, {user.get_username()}?"),
    ]


@chat.set_chat_profiles
async def profiles(user: User) -> list[chat.ChatProfile]:
    return [
        chat.ChatProfile(
            name=ECHO,
            markdown_description="Repeats what you say.",
            default=True,
        ),
        chat.ChatProfile(
            name=REVERSE,
            markdown_description="Says it **backwards**.",
            icon="/static/tether/favicon.svg",
            starters=[
                chat.Starter(label="Reverse a word", message="stressed"),
                chat.Starter(label="Reverse a palindrome", message="racecar"),
            ],
        ),
    ]


def answer(profile: str, text: str) -> str:
    """What a profile makes of a message."""
    if profile == REVERSE:
        return f"{REVERSE}: {text[::-1]}"
    return f"{ECHO}: {text}"


@chat.on_chat_start
async def greet() -> None:
    await chat.Message(f"Hi! This chat uses the {chat.user_session.get('chat_profile')} profile.").send()


@chat.on_message
async def reply(message: chat.Message) -> None:
    await chat.Message(answer(chat.user_session.get("chat_profile"), message.content)).send()


@chat.on_chat_resume
async def welcome_back(thread: dict[str, Any]) -> None:
    await chat.Message(f"Welcome back. Still the {chat.user_session.get('chat_profile')} profile.").send()
