"""A hooks-API app whose settings panel has a number on a step of 0.5 with no bounds (the
float edge cases: a value, or a count of steps, too large for a float), declared in
on_chat_start; ``on_settings_update`` keeps what it got in the user session."""

from typing import Any

from sessions_app import chat

INPUTS: list[chat.InputWidget] = [chat.NumberInput(id="nb", label="Number", initial=1, step=0.5)]


@chat.on_chat_start
async def start() -> None:
    await chat.ChatSettings(INPUTS).send()
    chat.user_session.set("updates", [])
    await chat.Message("Ready").send()


@chat.on_settings_update
async def updated(settings: dict[str, Any]) -> None:
    chat.user_session.set("updates", [*(chat.user_session.get("updates") or []), settings])
