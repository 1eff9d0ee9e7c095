"""A hooks-API app with action buttons and the three asks, for the socket and browser tests.

Messages are commands: ``ask name [timeout]``, ``ask pick [timeout]``, ``ask file [timeout]``,
``ask doc`` (a PDF or a text file), ``buttons``; anything else is echoed. Every answer is said back in a message, so a test sees
what the hook received (and how many times).
"""

import asyncio
import hashlib
from pathlib import Path

from sessions_app import chat


def _timeout(text: str, default: float) -> float:
    parts = text.split()
    return float(parts[2]) if len(parts) > 2 else default


@chat.on_chat_start
async def start() -> None:
    """With ``userEnv {"greet": "buttons"}`` a greeting with a button, with ``{"greet": "ask"}``
    a question, both before the thread exists."""
    greet = chat.user_session.get("env").get("greet")
    if greet == "buttons":
        await chat.Message(
            "Welcome", actions=[chat.Action(name="colour", payload={"value": "green"}, label="Green")]
        ).send()
    elif greet == "ask":
        reply = await chat.AskUserMessage("Who are you?", timeout=30).send()
        await chat.Message(f"Welcome, {reply['output']}!" if reply else "Welcome, stranger.").send()


@chat.on_chat_resume
async def resume(thread: dict[str, object]) -> None:
    """Reopened threads resume (Tether restores the history)."""


@chat.on_message
async def on_message(message: chat.Message) -> None:
    text = message.content.strip()
    if text.startswith("ask name"):
        reply = await chat.AskUserMessage("What is your name?", timeout=_timeout(text, 60)).send()
        await chat.Message(f"Hello, {reply['output']}!" if reply else "No name given.").send()
    elif text.startswith("ask pick"):
        chosen = await chat.AskActionMessage(
            "Shall we go on?",
            actions=[
                chat.Action(name="go", payload={"go": True}, label="Go on", tooltip="Carry on", icon="check"),
                chat.Action(name="halt", payload={"go": False}, label="Halt"),
            ],
            timeout=_timeout(text, 60),
        ).send()
        await chat.Message(
            f"Chosen: {chosen['name']} {chosen['payload']}" if chosen else "Nothing chosen."
        ).send()
    elif text.startswith("ask file"):
        files = await chat.AskFileMessage(
            "Send a PNG picture", accept=["image/png"], max_size_mb=1, max_files=2, timeout=_timeout(text, 60)
        ).send()
        if files:
            described = ", ".join(f"{f.name} {f.type} {f.size} {len(f.read())}" for f in files)
            await chat.Message(f"Files: {described}").send()
        else:
            await chat.Message("No file given.").send()
    elif text == "ask doc":
        docs = await chat.AskFileMessage(
            "Send a PDF or a text file", accept=["application/pdf", "text/plain"], max_files=2, timeout=60
        ).send()
        for doc in docs or []:
            content = doc.read()
            on_disk = "none"
            if doc.path is not None:
                on_disk = "same" if await asyncio.to_thread(Path(doc.path).read_bytes) == content else "other"
            await chat.Message(
                f"Doc: {doc.name} {doc.mime} {doc.size} {len(content)} "
                f"{hashlib.sha256(content).hexdigest()[:16]} path={on_disk}"
            ).send()
    elif text == "buttons":
        await chat.Message(
            "Pick a colour",
            actions=[
                chat.Action(name="colour", payload={"value": "red"}, label="Red", tooltip="The red one"),
                chat.Action(name="colour", payload={"value": "blue"}, label="Blue"),
                chat.Action(name="vanish", payload={}, label="Use once"),
            ],
        ).send()
    else:
        await chat.Message(f"echo: {text}").send()


@chat.action_callback("colour")
async def colour(action: chat.Action) -> None:
    await chat.Message(f"Colour: {action.payload['value']}").send()


@chat.action_callback("vanish")
async def vanish(action: chat.Action) -> None:
    await action.remove()
    await chat.Message("Used once.").send()
