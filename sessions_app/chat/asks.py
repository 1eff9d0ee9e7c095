"""``chat.AskUserMessage``, ``chat.AskActionMessage``, ``chat.AskFileMessage``: a question
whose ``send()`` waits for the user's answer, or None when ``timeout`` seconds pass first.

Chainlit's names, arguments and answers: a text ask returns the reply's StepDict (``output``,
``id``, ...), which is also a user message in the transcript; an action ask returns the chosen
action's dict; a file ask returns the files (``id, name, type, size``, their bytes by
``read()``). How the wait survives reconnects and two tabs is ``sessions_app.asks``.
"""

from dataclasses import dataclass, field
from typing import Any

from sessions_app import asks, lifecycle
from sessions_app.chat.actions import Action
from sessions_app.chat.context import require_session
from sessions_app.chat.message import Message
from sessions_app.database import database_sync_to_async


class AskMessageBase:
    kind = ""

    def __init__(
        self,
        content: str,
        *,
        author: str,
        timeout: float,
        raise_on_timeout: bool,
        actions: list[Action] | None,
    ) -> None:
        # Marked a question (``metadata.notice``): it answers nothing, so the page offers no
        # feedback or Copy on it.
        self.message = Message(content, author=author, actions=actions, metadata={"notice": "ask"})
        self.content = content
        self.timeout = timeout
        self.raise_on_timeout = raise_on_timeout

    @property
    def id(self) -> Any:
        return self.message.id

    def spec(self) -> dict[str, Any]:
        return {}

    async def _ask(self) -> Any:
        return await asks.ask(
            require_session(),
            self.message,
            kind=self.kind,
            spec=self.spec(),
            timeout=self.timeout,
            raise_on_timeout=self.raise_on_timeout,
        )

    async def remove(self) -> None:
        await self.message.remove()


class AskUserMessage(AskMessageBase):
    """Ask for a text reply; it becomes the user's message in the transcript."""

    kind = "text"

    def __init__(
        self, content: str, *, author: str = "assistant", timeout: float = 60, raise_on_timeout: bool = False
    ) -> None:
        super().__init__(
            content, author=author, timeout=timeout, raise_on_timeout=raise_on_timeout, actions=None
        )

    async def send(self) -> dict[str, Any] | None:
        answer = await self._ask()
        if answer is None:
            return None
        session = require_session()
        # A client that drew the answer under its own id (Chainlit's frontend) has it named in
        # ``acceptedIds``, as a send's client has: it is shown under that id and not twice.
        drawn_as = answer.get("id")
        reply = Message(
            answer["output"],
            author=session.user.get_username(),
            type="user_message",
            metadata={"acceptedIds": [drawn_as]} if drawn_as else None,
        )
        # The reply is the user's message: transcribed (the first one creates and names the
        # thread, as a first send does) and shown on every tab.
        if not session.has_first_interaction:
            await lifecycle.first_interaction(session, reply.content)
        await reply.send()
        return reply.to_dict()


class AskActionMessage(AskMessageBase):
    """Ask the user to pick one of ``actions``; the buttons go once it is answered."""

    kind = "action"

    def __init__(
        self,
        content: str,
        *,
        actions: list[Action],
        author: str = "assistant",
        timeout: float = 90,
        raise_on_timeout: bool = False,
    ) -> None:
        if not actions:
            raise ValueError("AskActionMessage needs at least one action")
        super().__init__(
            content, author=author, timeout=timeout, raise_on_timeout=raise_on_timeout, actions=actions
        )

    def spec(self) -> dict[str, Any]:
        return {"keys": [a.id for a in self.message.actions]}

    async def send(self) -> dict[str, Any] | None:
        try:
            answer: dict[str, Any] | None = await self._ask()
        except TimeoutError:
            await self._settle("Timed out: no action was taken")
            raise
        label = (answer.get("label") or answer.get("name")) if answer else None
        await self._settle(f"**Selected:** {label}" if answer else "Timed out: no action was taken")
        return answer

    async def _settle(self, text: str) -> None:
        """The question says what was chosen, without its buttons, on every tab."""
        self.message.actions = []
        self.message.content = text
        await self.message.update()


@dataclass
class AskFile:
    """A file the user gave an ``AskFileMessage`` (Chainlit's ``AskFileResponse`` fields:
    ``id, name, type, size, path``, and ``mime``); its bytes are ``content`` and ``read()``.
    ``path`` is a file on this machine for a file that is not a photo when the elements
    storage is the filesystem, else None (read the bytes instead)."""

    id: str
    name: str
    type: str
    size: int
    content: bytes = field(repr=False, default=b"")
    path: str | None = None

    @property
    def mime(self) -> str:
        return self.type

    def read(self) -> bytes:
        return self.content


class AskFileMessage(AskMessageBase):
    """Ask for files: ``accept`` is a list of MIME types (``"image/*"`` allowed) or
    ``{mime: [".ext", ...]}``; uploads go through ``POST /api/uploads/``."""

    kind = "file"

    def __init__(
        self,
        content: str,
        *,
        accept: list[str] | dict[str, list[str]],
        max_size_mb: int = 2,
        max_files: int = 1,
        author: str = "assistant",
        timeout: float = 90,
        raise_on_timeout: bool = False,
    ) -> None:
        from sessions_app import asks

        super().__init__(
            content, author=author, timeout=timeout, raise_on_timeout=raise_on_timeout, actions=None
        )
        self._spec = asks.file_spec(accept, max_size_mb, max_files)

    def spec(self) -> dict[str, Any]:
        return dict(self._spec)

    async def send(self) -> list[AskFile] | None:
        answer: list[dict[str, Any]] | None = await self._ask()
        if answer is None:
            return None
        stored = await database_sync_to_async(asks.read_files)(require_session().user, answer)
        files = []
        for named in answer:
            content, path = stored.get(named["id"], (b"", None))
            files.append(AskFile(named["id"], named["name"], named["type"], named["size"], content, path))
        return files
