"""Benchmarks that drive the whole stack (daphne, PostgreSQL, the channel layer)."""
