"""A hooks-API app whose ``on_message`` streams a reply with a fenced python block
(:data:`CODE_REPLY`), for the code highlighting and copy buttons of the web page."""

from sessions_app import chat

# Characters a careless copy would lose or mangle: indentation, quotes, ``<`` and ``&``.
CODE = 'def greet(name):\n    return f"<b>{name}</b> & more"  # say hi\n\n\nprint(greet("Ada"))'
CODE_REPLY = f"Here is some code:\n\n```python\n{CODE}\n```\n\nThat is all."


@chat.on_message
async def answer(message: chat.Message) -> None:
    reply = chat.Message()
    for line in CODE_REPLY.splitlines(keepends=True):
        await reply.stream_token(line)
    await reply.send()
