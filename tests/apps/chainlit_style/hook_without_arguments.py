from sessions_app import chat as cl

# Hooks that take none of the arguments Tether has for them, as Chainlit passes only the
# ones a function names.


@cl.on_message
async def main():
    await cl.Message(content="answered without reading the message").send()


@cl.on_chat_resume
async def resume():
    await cl.Message(content="resumed without reading the thread").send()
