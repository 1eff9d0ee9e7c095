"""The chat app served during ``bench/echo.py``: one reply per user message.

``on_message`` answers each message with exactly one ``chat.Message(...).send()`` whose
content is ``"<n>: <the message's text>"``, ``n`` being the length of ``chat.chat_context``
the hook sees (the user's message already in it), so the benchmark can check every reply and
that the context grows by two messages per turn. No ``on_chat_start``: a session's first
reply is ``"1: ..."``.
"""

from sessions_app import chat


@chat.on_message
async def echo(message: chat.Message) -> None:
    # chat.chat_context is an accessor without len(): .get() is the session's message list.
    await chat.Message(content=f"{len(chat.chat_context.get())}: {message.content}").send()
