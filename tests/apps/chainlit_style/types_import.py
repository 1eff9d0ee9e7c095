from sessions_app import chat as cl

# ``chainlit.types`` imports for the hooks' type hints, with the module path changed.

from sessions_app.chat.types import ThreadDict


@cl.on_chat_resume
async def resume(thread: ThreadDict):
    steps: list[cl.types.StepDict] = thread["steps"]
    await cl.Message(content=f"resumed {thread['id']} after {len(steps)} steps").send()


@cl.on_message
async def main(message: cl.Message):
    await cl.Message(content=f"echo {message.content}").send()
