"""The curation layer's exception family."""

from __future__ import annotations

from shopbench.errors import ShopbenchError


class CurationError(ShopbenchError):
    """Curation cannot run: a bad config (unknown rule or parameter), an unreadable archive,
    truth file or test set, or a result with nothing in it."""


class EmptyResult(CurationError):
    """Every trajectory was dropped: there is no curated set to write."""


class CuratedSetError(CurationError):
    """A curated set cannot be written or read (no curated files, a file of another shape)."""
