"""Errors shared across layers (kept apart from cli.py so `python -m debate.cli` and importers see one class)."""

__all__ = ["UsageError"]


class UsageError(Exception):
    """Bad arguments or configuration: the command exits 2 with one line."""
