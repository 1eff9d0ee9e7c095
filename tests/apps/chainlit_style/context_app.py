from sessions_app import chat as cl

# ``cl.context``: the session's ids and user, the step running now, the emitter.


@cl.on_chat_start
async def start():
    session = cl.context.session
    await cl.Message(
        content=f"session {session.id} thread {session.thread_id} user {session.user.identifier}"
    ).send()


@cl.step(type="tool")
async def lookup(query: str):
    current = cl.context.current_step
    assert current is not None
    current.output = f"{current.name} looked up {query}"
    return current.output


@cl.on_message
async def main(message: cl.Message):
    outside = cl.context.current_step
    found = await lookup(message.content)
    await cl.context.emitter.emit("custom_event", {"found": found})
    await cl.Message(content=f"{found}; outside any step: {outside}").send()
