"""An engine-runtime app for the budget tests (``budget_hooks``): messages go to the box's
engine (the echo engine), clicks and settings changes to the hooks."""

from sessions_app import chat
from tests.apps import budget_hooks

chat.use_engine_runtime()
budget_hooks.register()
