"""Reading the hook log that ``tests.apps.lifecycle_app`` writes (one JSON line per call)."""

import json
from pathlib import Path
from typing import Any


def hook_calls(path: Path, session: str | None = None, hook: str | None = None) -> list[dict[str, Any]]:
    """Hook calls logged at ``path``, optionally only one session's and one hook's. A server
    process and an in-process test read the same format, so "once per session" is counted
    the same way in both."""
    if not path.exists():
        return []
    calls = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [
        c
        for c in calls
        if (session is None or c["session"] == session) and (hook is None or c["hook"] == hook)
    ]
