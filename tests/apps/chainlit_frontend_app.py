"""A Chainlit-style app for the tests of Chainlit's own frontend served by Tether
(``tests/e2e/test_chainlit_frontend.py``), written the way Chainlit's docs show each part.

Messages are commands: ``slow <n>`` streams n words slowly (to press stop), ``ask`` asks for
a name, ``action`` sends a message with a button whose click is answered; anything else is
streamed back word by word ("You said: ...")."""

import asyncio

from sessions_app import chat as cl


@cl.set_starters
async def starters() -> list[cl.Starter]:
    return [
        cl.Starter(label="Say hello", message="hello from a starter"),
        cl.Starter(label="Ask me", message="ask"),
    ]


@cl.on_chat_resume
async def resume(thread: dict[str, object]) -> None:
    """Reopened threads resume (Tether restores the history)."""


@cl.on_message
async def main(message: cl.Message) -> None:
    text = message.content.strip()
    if text.startswith("slow"):
        reply = cl.Message(content="")
        for i in range(int(text.split()[1])):
            await reply.stream_token(f"w{i} ")
            await asyncio.sleep(0.3)
        await reply.send()
    elif text == "ask":
        answer = await cl.AskUserMessage(content="What is your name?", timeout=60).send()
        await cl.Message(content=f"Nice to meet you, {answer['output']}." if answer else "No name.").send()
    elif text == "action":
        button = cl.Action(name="wave", payload={"times": 2}, label="Wave back")
        await cl.Message(content="Press the button.", actions=[button]).send()
    else:
        reply = cl.Message(content="")
        for word in f"You said: {text}".split():
            await reply.stream_token(word + " ")
            await asyncio.sleep(0.02)
        await reply.send()


@cl.action_callback("wave")
async def wave(action: cl.Action) -> None:
    await cl.Message(content=f"Waved {action.payload['times']} times.").send()
