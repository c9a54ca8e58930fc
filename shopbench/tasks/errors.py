"""The task layer's exception family: :class:`TaskError`, its root."""

from __future__ import annotations

from shopbench.errors import ShopbenchError


class TaskError(ShopbenchError):
    """A task record, task file, reward spec or generation request is invalid."""
