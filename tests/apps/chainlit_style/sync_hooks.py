from sessions_app import chat as cl

# Plain ``def`` hooks, as Chainlit's docs allow: they run off the event loop, and reach it
# back through ``cl.run_sync``. ``block N`` holds this session's hook for N seconds.

import threading
import time


@cl.on_chat_start
def start():
    cl.user_session.set("start_thread", threading.current_thread().name)
    cl.run_sync(cl.Message(content="Hello from a plain function").send())


@cl.on_message
def main(message: cl.Message):
    words = message.content.split()
    if words[:1] == ["block"]:
        time.sleep(float(words[1]))
    started_on = cl.user_session.get("start_thread")
    here = threading.current_thread().name
    cl.run_sync(cl.Message(content=f"{message.content}: started on {started_on}, answered on {here}").send())
