"""An example Tether app that uses every part of the hooks API, to read and to copy.

Run it with ``CHAT_APP=examples.showcase_app make run``. docs/migrating-from-chainlit.md sets
each part beside the Chainlit app that does the same.

- ``set_chat_profiles`` / ``set_starters``: two profiles and their starters on the empty chat;
- ``on_chat_start`` greets and declares the chat settings (a settings panel: model, streaming,
  temperature, persona, word limit, topics); ``on_settings_update`` hears each change;
- ``on_message`` answers by keyword, each answer after a "search" tool step (``chat.step``,
  with a "rank" step nested in it) and a streamed "think" step (``chat.Step``):
  "code" a highlighted block with an "Explain it" action button (``action_callback``),
  "math" LaTeX, "report" elements (an image, a plot, a text, a PDF in the side panel, a file),
  "quiz" a question with buttons (``AskActionMessage``), "name" a question for text
  (``AskUserMessage``), "upload" a question for a file (``AskFileMessage``); anything else is
  echoed, with the files the user attached listed;
- ``on_chat_resume`` welcomes back; ``on_stop`` and ``on_chat_end`` log;
- ``on_feedback`` logs the thumbs a user gives.
"""

import asyncio
import json
import logging
from pathlib import Path

from django.contrib.auth.models import User

from sessions_app import chat

logger = logging.getLogger(__name__)

ASSETS = Path(__file__).parent / "assets"
CODE_SAMPLE = '```python\ndef greet(name: str) -> str:\n    return f"Hello, {name}!"\n```'
MATH_SAMPLE = "The area under $y = x^2$ from 0 to 1:\n\n$$\\int_0^1 x^2\\,dx = \\frac{1}{3}$$"
FIGURE = {
    "data": [{"type": "bar", "x": ["Mon", "Tue", "Wed"], "y": [3, 5, 2], "name": "messages"}],
    "layout": {"title": {"text": "Messages a day"}, "height": 300},
}


@chat.set_chat_profiles
async def profiles(user: User) -> list[chat.ChatProfile]:
    return [
        chat.ChatProfile(name="Helper", markdown_description="Answers with **care**.", default=True),
        chat.ChatProfile(name="Terse", markdown_description="Answers in few words."),
    ]


@chat.set_starters
async def starters(user: User) -> list[chat.Starter]:
    return [
        chat.Starter(label="Show me code", message="show me code"),
        chat.Starter(label="Some math", message="math"),
        chat.Starter(label="A report", message="report"),
        chat.Starter(label="A quiz", message="quiz"),
    ]


@chat.on_chat_start
async def greet() -> None:
    await chat.ChatSettings(
        [
            chat.Select(id="model", label="Model", values=["small", "large"], initial_index=0),
            chat.Switch(id="stream", label="Stream the reply", initial=True),
            chat.Slider(id="temperature", label="Temperature", initial=0.7, min=0, max=2, step=0.1),
            chat.TextInput(id="persona", label="Persona", placeholder="Who answers"),
            chat.NumberInput(id="max_words", label="Word limit", initial=200, min=1, max=1000, step=1),
            chat.Tags(id="topics", label="Topics", initial=["news"], values=["news", "sport", "science"]),
        ]
    ).send()
    profile = chat.user_session.get("chat_profile")
    await chat.Message(f"Hi! You are talking to the {profile} profile. Try a starter.").send()


@chat.on_settings_update
async def settings_changed(settings: dict) -> None:
    await chat.Message(f"Settings saved: the {settings['model']} model from now on.").send()


@chat.step(type="tool")
async def search(query: str) -> dict:
    """A stand-in for a real tool: its arguments are the step's input, its result the output."""
    async with chat.Step(name="rank", type="rerank") as step:  # nested under "search"
        step.input = query
        await asyncio.sleep(0.05)
        step.output = "3 results, best first"
    return {"query": query, "hits": 3}


async def think(found: dict) -> None:
    async with chat.Step(name="think", type="llm") as step:  # under the user's message
        step.input = found
        for token in ("Three ", "results ", "found."):
            await step.stream_token(token)


@chat.on_message
async def answer(message: chat.Message) -> None:
    text = message.content.strip()
    keyword = text.lower()
    await think(await search(text))
    if keyword == "quiz":
        await quiz()
    elif keyword == "name":
        reply = await chat.AskUserMessage("What is your name?", timeout=120).send()
        await chat.Message("No answer." if reply is None else f"Nice to meet you, {reply['output']}.").send()
    elif keyword == "upload":
        files = await chat.AskFileMessage("Send me a photo.", accept=["image/*"], timeout=120).send()
        await chat.Message(
            "No file." if not files else f"Got {files[0].name} ({files[0].size} bytes)."
        ).send()
    elif keyword == "report":
        await report()
    elif keyword == "math":
        await chat.Message(MATH_SAMPLE).send()
    else:
        await echo(text, code="code" in keyword, attached=[element.name for element in message.elements])


async def echo(text: str, *, code: bool, attached: list[str]) -> None:
    reply = f"Here is a function:\n\n{CODE_SAMPLE}" if code else f"You said: {text}"
    if attached:
        reply += "\n\nYou attached: " + ", ".join(attached)
    explain = chat.Action(
        name="explain", payload={"function": "greet"}, label="Explain it", tooltip="What it does"
    )
    streamed = chat.Message(actions=[explain] if code else None)
    stream = chat.user_session.get("chat_settings", {}).get("stream", True)
    for word in reply.split(" ") if stream else [reply]:
        await streamed.stream_token(word + " ")
    await streamed.send()


async def quiz() -> None:
    chosen = await chat.AskActionMessage(
        "Which language is the code in?",
        actions=[
            chat.Action(name="language", payload={"right": True}, label="Python"),
            chat.Action(name="language", payload={"right": False}, label="Rust"),
        ],
        timeout=120,
    ).send()
    verdict = "No answer." if chosen is None else ("Right!" if chosen["payload"]["right"] else "Not quite.")
    await chat.Message(verdict).send()


async def report() -> None:
    await chat.Message(
        "Here is this week's report.",
        elements=[
            chat.Image(name="chart.png", path=ASSETS / "chart.png", display="inline"),
            chat.Plotly(name="messages", figure=FIGURE),
            chat.Text(name="numbers.json", content=json.dumps(FIGURE["data"][0], indent=2), language="json"),
            chat.Pdf(name="guide.pdf", path=ASSETS / "guide.pdf", display="side"),
            chat.File(name="numbers.csv", content="day,messages\nMon,3\nTue,5\nWed,2\n"),
        ],
    ).send()


@chat.action_callback("explain")
async def explain(action: chat.Action) -> None:
    await chat.Message(f"`{action.payload['function']}` returns a greeting for the name it is given.").send()


@chat.on_chat_resume
async def welcome_back(thread: dict) -> None:
    await chat.Message(f"Welcome back to '{thread['name']}'.").send()


@chat.on_stop
async def stopped() -> None:
    logger.info("a reply was stopped")


@chat.on_chat_end
async def ended() -> None:
    logger.info("a chat ended")


@chat.on_feedback
async def feedback(given: chat.Feedback) -> None:
    logger.info("feedback %s on %s", given.value, given.forId)
