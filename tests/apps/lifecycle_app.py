"""A chat app for the lifecycle tests: every hook call is logged to ``$HOOK_LOG``.

One JSON line per call (``{"hook", "session", "pid", ...}``), appended with O_APPEND so two
server processes can share the file. Messages drive it:

- ``sleep N``: sleep N seconds (stoppable), then say "slept";
- ``stream N`` / ``slowstream N S``: stream N tokens ``t0 t1 ...`` (with S seconds before each);
- ``set KEY VALUE`` / ``get KEY``: the user session;
- ``ctx``: reply with the chat context's length and ids;
- ``replythensleep N``: reply "replied", then sleep N seconds (a hook that runs on after its send);
- ``log TEXT``: write TEXT to the server's log (a warning of the ``tests.app`` logger), then reply;
- anything else: "echo: <text>".
"""

import asyncio
import json
import logging
import os
from typing import Any

from sessions_app import chat


def log(hook: str, **extra: object) -> None:
    session = chat.current_session.get()
    line = {"hook": hook, "session": str(session.id) if session else None, "pid": os.getpid(), **extra}
    path = os.environ.get("HOOK_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")


@chat.on_chat_start
async def start() -> None:
    log("on_chat_start")
    chat.user_session.set("started", True)
    await chat.Message("greeting").send()


@chat.on_chat_resume
async def resume(thread: dict[str, Any]) -> None:
    log("on_chat_resume", thread=thread["id"], steps=len(thread["steps"]))
    await chat.Message("welcome back").send()


@chat.on_message
async def message(msg: chat.Message) -> None:
    log("on_message", content=msg.content)
    words = msg.content.split()
    if words and words[0] == "sleep":
        await asyncio.sleep(float(words[1]))
        await chat.Message("slept").send()
    elif words and words[0] == "set":
        chat.user_session.set(words[1], " ".join(words[2:]))
        await chat.Message(f"set {words[1]}").send()
    elif words and words[0] == "get":
        await chat.Message(f"{words[1]}={chat.user_session.get(words[1])}").send()
    elif words and words[0] == "replythensleep":
        await chat.Message("replied").send()
        await asyncio.sleep(float(words[1]))
    elif words and words[0] == "log":
        logging.getLogger("tests.app").warning(" ".join(words[1:]))
        await chat.Message("logged").send()
    elif words and words[0] == "ctx":
        context = chat.chat_context.get()
        await chat.Message(json.dumps({"len": len(context), "ids": [str(m.id) for m in context]})).send()
    elif words and words[0] == "stream":
        reply = chat.Message()
        for i in range(int(words[1])):
            await reply.stream_token(f"t{i} ")
        await reply.send()
    elif words and words[0] == "slowstream":  # slowstream N SECONDS: N tokens, a pause before each
        reply = chat.Message()
        for i in range(int(words[1])):
            await asyncio.sleep(float(words[2]))
            await reply.stream_token(f"t{i} ")
        await reply.send()
    else:
        await chat.Message(f"echo: {msg.content}").send()


@chat.on_chat_end
async def end() -> None:
    log("on_chat_end")


@chat.on_stop
async def stopped() -> None:
    log("on_stop")
