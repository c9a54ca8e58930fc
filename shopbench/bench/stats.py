"""The statistics every bench reports: one definition of a percentile for all of them."""

from __future__ import annotations

import math
from collections.abc import Iterable


def percentile(values: Iterable[float], q: float) -> float:
    """The q-quantile (``q`` from 0 to 1) of `values` by nearest rank; 0.0 for no values.

    Nearest rank: the smallest value that at least a share `q` of the values do not exceed,
    that is the ``ceil(q * n)``-th smallest of ``n`` (the smallest for ``q = 0``). So p50 of
    an even count is the lower of the two middle values, p99 of 100 values is the 99th,
    and every result is one of the values, never an interpolation. ValueError for a `q`
    outside 0..1.
    """
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"percentile q must be between 0 and 1, got {q!r}")
    ordered = sorted(values)
    if not ordered:
        return 0.0
    # Rounded first so that float noise (0.07 * 100 = 7.000000000000001) keeps its rank.
    rank = math.ceil(round(q * len(ordered), 9))
    return ordered[max(rank, 1) - 1]
