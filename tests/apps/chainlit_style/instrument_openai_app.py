from sessions_app import chat as cl

# ``cl.instrument_openai()`` as Chainlit's OpenAI docs call it; in Tether it is accepted and
# does nothing but say so once.


@cl.on_chat_start
async def start():
    cl.instrument_openai()
    await cl.Message(content="instrumented").send()
