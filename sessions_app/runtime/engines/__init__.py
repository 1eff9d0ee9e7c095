"""Engines: the things that answer. ``get_engine(name, options)`` builds one for a box."""

from typing import Any

from sessions_app.runtime.engines.base import Engine, EngineError, Run, UserTurn


def get_engine(name: str, options: dict[str, Any] | None = None) -> Engine:
    options = options or {}
    if name == "echo":
        from sessions_app.runtime.engines.echo import EchoEngine

        return EchoEngine(options)
    if name == "openai":
        from sessions_app.runtime.engines.openai_engine import OpenAIEngine

        return OpenAIEngine(options)
    if name == "claude":
        from sessions_app.runtime.engines.claude_engine import ClaudeEngine

        return ClaudeEngine(options)
    raise EngineError(f"unknown engine {name!r}")


__all__ = ["Engine", "EngineError", "Run", "UserTurn", "get_engine"]
