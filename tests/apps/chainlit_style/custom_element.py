from sessions_app import chat as cl

# ``cl.CustomElement`` as Chainlit's docs attach one to a message.


@cl.on_chat_start
async def start():
    counter = cl.CustomElement(name="Counter", props={"count": 0, "label": "clicks"})
    await cl.Message(content="This message has a counter", elements=[counter]).send()
