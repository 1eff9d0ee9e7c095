"""The hooks of the budget test apps (``budgets_app``: hooks API, ``budgets_engine_app``:
engine runtime), registered by each app module as it is imported. Every run of a budgeted
hook is logged to ``$HOOK_LOG`` (``tests.apps.lifecycle_app.log``'s format) so a test counts
them, in process or in a daphne:

- ``on_chat_start`` sends a message with a ``count`` button (its payload ``{"sleep": S}``,
  S from ``userEnv.sleep``, default 0) and, with ``userEnv.ask``, asks a question;
- the ``count`` callback logs ``click`` and sleeps S seconds;
- ``on_settings_update`` logs ``settings`` with the values, then sleeps ``settings.sleep``.
"""

import asyncio
from typing import Any

from sessions_app import chat
from tests.apps.lifecycle_app import log


async def start() -> None:
    env = chat.user_session.get("env") or {}
    sleep = float(env.get("sleep") or 0)
    await chat.Message(
        "buttons", actions=[chat.Action(name="count", payload={"sleep": sleep}, label="Count")]
    ).send()
    if env.get("ask"):
        reply = await chat.AskUserMessage("Who are you?", timeout=60).send()
        await chat.Message(f"Hello, {reply['output']}!" if reply else "No name given.").send()


async def count(action: chat.Action) -> None:
    log("click")
    await asyncio.sleep(float(action.payload.get("sleep") or 0))


async def settings_updated(settings: dict[str, Any]) -> None:
    log("settings", values=settings)
    await asyncio.sleep(float(settings.get("sleep") or 0))


async def resume(thread: dict[str, Any]) -> None:
    """Reopened threads resume (Tether restores the history)."""


def register() -> None:
    chat.on_chat_start(start)
    chat.on_chat_resume(resume)
    chat.action_callback("count")(count)
    chat.on_settings_update(settings_updated)
