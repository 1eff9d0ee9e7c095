"""The engine-run layer: engines, run phases, interactive and thread sessions, the box pool."""
