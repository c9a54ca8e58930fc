"""The outcome grader's exception family: :class:`OutcomeError`, its root."""

from __future__ import annotations

from shopbench.errors import ShopbenchError


class OutcomeError(ShopbenchError):
    """The outcome grader cannot grade as asked; the root of the outcome layer's errors."""


class EmbeddingModelMissing(OutcomeError):
    """The embedding matcher was asked for but its package or model is not available."""
