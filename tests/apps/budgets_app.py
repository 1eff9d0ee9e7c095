"""A hooks-API app for the budget tests (``budget_hooks``); ``on_message`` echoes, which is
what the latency probe waits for."""

from sessions_app import chat
from tests.apps import budget_hooks

budget_hooks.register()


@chat.on_message
async def answer(message: chat.Message) -> None:
    await chat.Message(f"echo: {message.content}").send()
