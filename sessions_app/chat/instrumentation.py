"""``chat.instrument_openai()``: in Chainlit, every OpenAI call becomes an ``llm`` step (through
the Literal AI SDK). Tether does not patch the OpenAI client: the call is accepted so that an
app imports and runs, does nothing, and says so once in the log. Show a call as a step by
wrapping it in ``@chat.step(type="llm")``.
"""

import logging
import threading

logger = logging.getLogger(__name__)
_said = threading.Event()


def instrument_openai() -> None:
    """Log once that OpenAI calls are not turned into steps; nothing else."""
    if not _said.is_set():
        _said.set()
        logger.warning(
            "chat.instrument_openai() does nothing in Tether: OpenAI calls are not shown as steps "
            "(wrap them in @chat.step(type='llm') to show them)"
        )
