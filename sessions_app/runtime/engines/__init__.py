"""Engines: the things that answer. ``get_engine(name, options)`` builds one for a box.

``ENGINES`` maps each engine a box can name (``Box.Engine``, the record's choices) to its
class; ``get_engine`` and the admin form read it. Each engine class declares its ``OPTIONS`` (``engines.options``);
modules are imported on first use, since the SDKs behind ``openai`` and ``claude`` are heavy.
"""

from collections.abc import Awaitable, Callable
from importlib import import_module
from typing import Any

from sessions_app.runtime.engines.base import Engine, EngineError, Run, UserTurn
from sessions_app.runtime.engines.options import Schema, validate

# name -> "module:class"
ENGINES: dict[str, str] = {
    "echo": "sessions_app.runtime.engines.echo:EchoEngine",
    "openai": "sessions_app.runtime.engines.openai_engine:OpenAIEngine",
    "claude": "sessions_app.runtime.engines.claude_engine:ClaudeEngine",
}


def engine_class(name: str) -> Any:
    if name not in ENGINES:
        raise EngineError(f"unknown engine {name!r}")
    module, _, cls = ENGINES[name].partition(":")
    return getattr(import_module(module), cls)


def can_rewind(name: str) -> bool:
    """Whether engine ``name`` can forget what followed a message (``base.Rewinds``): the
    engines whose chats let a user edit a sent message."""
    try:
        return callable(getattr(engine_class(name), "rewind", None))
    except EngineError:
        return False


def get_engine(
    name: str,
    options: dict[str, Any] | None = None,
    *,
    transcript: Callable[[str], Awaitable[list[dict[str, Any]]]] | None = None,
) -> Engine:
    """Build an engine; ``transcript`` reads a conversation's steps by engine session id, for
    the engines that replay it to resume (``READS_TRANSCRIPT``), so none imports the models."""
    cls = engine_class(name)
    engine: Engine
    if transcript is not None and getattr(cls, "READS_TRANSCRIPT", False):
        engine = cls(options or {}, transcript=transcript)
    else:
        engine = cls(options or {})
    return engine


def option_errors(name: str, options: Any) -> dict[str, str]:
    """What is wrong with ``options`` for engine ``name``, by option key; empty when valid."""
    schema: Schema = engine_class(name).OPTIONS
    return validate(schema, options)


__all__ = [
    "ENGINES",
    "Engine",
    "EngineError",
    "Run",
    "UserTurn",
    "can_rewind",
    "get_engine",
    "option_errors",
]
