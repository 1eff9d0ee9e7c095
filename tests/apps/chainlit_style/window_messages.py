from sessions_app import chat as cl

# ``@cl.on_window_message`` and ``cl.send_window_message``, as Chainlit's "Window messaging"
# docs show them: the host window talks to the app and gets an answer back.


@cl.on_window_message
async def window_message(message: str):
    if message.startswith("Client: "):
        await cl.Message(content=f"Window message received: {message}").send()
    await cl.send_window_message(f"Server: {message}")
