"""A hooks-API app for the upload copies finding: it answers a message carrying files with
their count and bytes, from the records alone (reading no file), and anything else with
``echo: <text>`` (the latency probe's messages)."""

from sessions_app import chat


@chat.on_message
async def answer(message: chat.Message) -> None:
    if message.elements:
        size = sum(element.size_bytes or 0 for element in message.elements)
        await chat.Message(f"got {len(message.elements)} files, {size} bytes").send()
        return
    await chat.Message(f"echo: {message.content}").send()
