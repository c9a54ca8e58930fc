"""The benchmark layer's exception family: :class:`BenchError`, its root."""

from __future__ import annotations

from shopbench.errors import ShopbenchError


class BenchError(ShopbenchError):
    """A benchmark cannot run as asked; the root of the benchmark layer's errors."""


class LuceneError(BenchError):
    """The Lucene side could not be set up or stopped answering."""
