"""An example Tether app that uses every part of the hooks API, to read and to copy.

Run it with ``CHAT_APP=examples.showcase_app make run``. docs/migrating-from-chainlit.md sets
each part beside the Chainlit app that does the same.

- ``set_chat_profiles`` / ``set_starters``: two profiles and their starters on the empty chat;
- ``on_chat_start`` greets; ``on_message`` answers by keyword ("code" shows a highlighted
  block, anything else is echoed) and streams its reply;
- ``on_feedback`` logs the thumbs a user gives.
"""

import logging

from django.contrib.auth.models import User

from sessions_app import chat

logger = logging.getLogger(__name__)

CODE_SAMPLE = '```python\ndef greet(name: str) -> str:\n    return f"Hello, {name}!"\n```'


@chat.set_chat_profiles
async def profiles(user: User) -> list[chat.ChatProfile]:
    return [
        chat.ChatProfile(name="Helper", markdown_description="Answers with **care**.", default=True),
        chat.ChatProfile(name="Terse", markdown_description="Answers in few words."),
    ]


@chat.set_starters
async def starters(user: User) -> list[chat.Starter]:
    return [
        chat.Starter(label="Show me code", message="show me code"),
        chat.Starter(label="Say hello", message="hello"),
    ]


@chat.on_chat_start
async def greet() -> None:
    profile = chat.user_session.get("chat_profile")
    await chat.Message(f"Hi! You are talking to the {profile} profile. Try a starter.").send()


@chat.on_message
async def answer(message: chat.Message) -> None:
    text = message.content.strip()
    reply = f"Here is a function:\n\n{CODE_SAMPLE}" if "code" in text.lower() else f"You said: {text}"
    streamed = chat.Message()
    for word in reply.split(" "):
        await streamed.stream_token(word + " ")
    await streamed.send()


@chat.on_feedback
async def feedback(given: chat.Feedback) -> None:
    logger.info("feedback %s on %s", given.value, given.forId)
