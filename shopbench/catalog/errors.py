"""The catalog layer's exception family.

:class:`CatalogError` is its root: a catalog directory, its data files or its search index
are missing, partial, corrupt or from an incompatible version, or a build was asked for with
bad parameters. :class:`SearchError` is a search request that is invalid (the environment's
tools turn it into an error observation); :class:`GeneratorError` a generator request out of
range.
"""

from __future__ import annotations

from shopbench.errors import ShopbenchError


class CatalogError(ShopbenchError):
    """A catalog directory is missing, partial, corrupt or from an incompatible version; the
    root of the catalog layer's errors."""


class SearchError(CatalogError):
    """A search request is invalid (bad filter value, page out of range, unknown sort)."""


class GeneratorError(CatalogError):
    """A generator request is out of range (e.g. a chunk index past the last chunk)."""
