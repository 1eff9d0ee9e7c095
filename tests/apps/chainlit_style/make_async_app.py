from sessions_app import chat as cl

# ``cl.make_async`` around blocking code, which itself reaches the chat with ``cl.run_sync``
# (the pattern of Chainlit's "Async / Sync" docs), and ``cl.sleep``.

import threading
import time


def blocking_work(text: str) -> str:
    time.sleep(0.1)
    cl.run_sync(cl.Message(content=f"working on {text}").send())
    return f"{text.upper()} (on {threading.current_thread().name})"


@cl.on_message
async def main(message: cl.Message):
    result = await cl.make_async(blocking_work)(message.content)
    await cl.sleep(0.05)
    await cl.Message(content=f"done: {result}").send()
