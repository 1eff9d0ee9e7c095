from sessions_app import chat as cl

# ``@cl.cache``: a costly value built once per process, whichever session asks first.

import itertools

builds = itertools.count(1)


@cl.cache
def load_model(name: str) -> str:
    return f"{name} model, build {next(builds)}"


@cl.on_chat_start
async def start():
    await cl.Message(content=f"using {load_model('small')}").send()
