from sessions_app import chat as cl

# ``@cl.step`` on a plain function, called from a plain ``on_message``.

import time


@cl.step(type="tool")
def tool(query: str) -> str:
    time.sleep(0.1)
    return f"result for {query}"


@cl.on_message
def main(message: cl.Message):
    result = tool(message.content)
    cl.run_sync(cl.Message(content=f"tool said: {result}").send())
