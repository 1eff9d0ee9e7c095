"""A hooks-API app with a settings panel: one input of every kind (but Checkbox), declared in on_chat_start.
Its replies say the settings they were made with; on_settings_update keeps every dict it
was given in the user session (``updates``, persisted with the thread) so tests can read it."""

from typing import Any

from sessions_app import chat

INPUTS = [
    chat.Select(
        id="model", label="Model", values=["small", "large"], initial_index=0, tooltip="Which model answers"
    ),
    chat.Switch(id="stream", label="Stream the reply", initial=True),
    chat.Slider(id="temperature", label="Temperature", initial=0.5, min=0, max=1, step=0.1),
    chat.TextInput(
        id="persona", label="Persona", initial="helpful", placeholder="Who answers", max_length=40
    ),
    chat.NumberInput(id="max_words", label="Max words", initial=100, min=1, max=1000, step=1),
    chat.Tags(id="topics", label="Topics", initial=["news"], values=["news", "sport", "weather"]),
    chat.MultiSelect(
        id="days",
        label="Days",
        items={"Monday": "mon", "Tuesday": "tue"},
        initial=["mon"],
        description="When to write",
    ),
]


def describe(values: dict[str, Any]) -> str:
    return (
        f"model={values['model']} stream={values['stream']} temperature={values['temperature']} "
        f"persona={values['persona']} max_words={values['max_words']} topics={','.join(values['topics'])}"
    )


@chat.on_chat_start
async def start() -> None:
    values = await chat.ChatSettings(INPUTS).send()
    chat.user_session.set("updates", [])
    await chat.Message(f"Ready with {describe(values)}").send()


@chat.on_settings_update
async def updated(settings: dict[str, Any]) -> None:
    chat.user_session.set("updates", [*(chat.user_session.get("updates") or []), settings])


@chat.on_message
async def answer(message: chat.Message) -> None:
    await chat.Message(f"[{describe(chat.user_session.get('chat_settings'))}] {message.content}").send()


@chat.on_chat_resume
async def resume(thread: dict[str, Any]) -> None:
    """Reopened threads resume; the panel and its values come back without declaring it again."""
