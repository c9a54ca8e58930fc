"""The exception family of shopbench, one branch per boundary.

Every error a user can trigger derives from :class:`ShopbenchError`; the CLI turns these
into one-line messages and never prints a traceback for them.
"""

from __future__ import annotations


class ShopbenchError(Exception):
    """Base of every error shopbench raises on purpose."""


class CatalogError(ShopbenchError):
    """A catalog directory is missing, partial, corrupt or from an incompatible version."""


class ImportRecordError(ShopbenchError):
    """One record of an imported file is malformed; carries the file and line number."""

    def __init__(self, path: str, line: int, reason: str) -> None:
        super().__init__(f"{path}:{line}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason


class SearchError(ShopbenchError):
    """A search request is invalid (bad filter value, page out of range, unknown sort)."""


class TaskError(ShopbenchError):
    """A task record or reward spec is invalid."""


class ToolError(ShopbenchError):
    """A tool call inside an episode is invalid; the episode turns it into an observation."""
