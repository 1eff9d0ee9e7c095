"""An example Tether app to copy: a note-taker that remembers across reloads.

Run it with ``CHAT_APP=examples.notes_app make run``.

- ``on_chat_start`` greets a new chat;
- ``on_message`` streams its answer token by token and keeps notes in the user session,
  which Tether persists into the thread's metadata at the end of every turn;
- ``on_chat_resume`` runs once when an old thread is reopened, after its history has been
  sent to the client, so its message shows below the history;
- ``on_chat_end`` runs once when the chat is cleared or its session expires;
- ``on_feedback`` hears of each thumbs up / down a user gives (or changes) on a reply.
"""

import logging

from sessions_app import chat

logger = logging.getLogger(__name__)


@chat.on_chat_start
async def greet() -> None:
    chat.user_session.set("notes", [])
    await chat.Message("Hi! Tell me things to remember, or say 'list'.").send()


@chat.on_message
async def take_note(message: chat.Message) -> None:
    notes: list[str] = chat.user_session.get("notes") or []
    if message.content.strip().lower() == "list":
        text = "\n".join(f"- {note}" for note in notes) or "No notes yet."
    else:
        notes.append(message.content)
        chat.user_session.set("notes", notes)
        text = f"Noted. That makes {len(notes)} note{'s' if len(notes) != 1 else ''}."
    reply = chat.Message()
    for word in text.split(" "):
        await reply.stream_token(word + " ")
    await reply.send()


@chat.on_chat_resume
async def welcome_back(thread: dict) -> None:
    notes = chat.user_session.get("notes") or []
    await chat.Message(f"Welcome back to '{thread['name']}'. You have {len(notes)} notes.").send()


@chat.on_chat_end
async def goodbye() -> None:
    logger.info("chat %s ended", chat.user_session.get("id"))


@chat.on_feedback
async def feedback_given(feedback: chat.Feedback) -> None:
    verdict = "up" if feedback.value == 1 else "down"
    logger.info(
        "%s gave thumbs %s to %s: %s", feedback.userIdentifier, verdict, feedback.forId, feedback.comment
    )
