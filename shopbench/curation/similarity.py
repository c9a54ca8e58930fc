"""MinHash signatures and their LSH bands, for near-duplicate trajectories.

The estimated Jaccard similarity of two shingle sets is the share of signature positions
where their MinHash values agree. LSH cuts a signature of ``P`` values into ``b`` bands of
``r`` rows (``b * r = P``); two sets land in a common band bucket with a probability that
rises steeply around ``(1/b)^(1/r)``, which :func:`bands_for` puts nearest the threshold.
Candidates from the buckets are then confirmed on their full signatures.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from functools import lru_cache

import numpy as np

_PRIME = np.uint64(4_294_967_311)  # the first prime above 2**32


@lru_cache(maxsize=8)
def _coefficients(permutations: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(20_240_917)  # fixed: signatures compare across runs
    a = rng.integers(1, 2**31 - 1, size=permutations, dtype=np.uint64)
    b = rng.integers(0, 2**31 - 1, size=permutations, dtype=np.uint64)
    return a, b


def minhash(shingles: Iterable[str], permutations: int) -> list[int]:
    """The MinHash signature of `shingles` (all values 2**32 for an empty set)."""
    hashes = np.fromiter(
        (zlib.crc32(s.encode("utf-8", "surrogatepass")) for s in shingles), dtype=np.uint64
    )
    if hashes.size == 0:
        return [2**32] * permutations
    a, b = _coefficients(permutations)
    values = (np.outer(a, hashes) + b[:, None]) % _PRIME
    return values.min(axis=1).astype(np.int64).tolist()


def bands_for(permutations: int, threshold: float) -> tuple[int, int]:
    """(bands, rows per band) with ``bands * rows == permutations`` whose LSH threshold
    ``(1/bands)^(1/rows)`` is nearest `threshold`."""
    pairs = [(b, permutations // b) for b in range(1, permutations + 1) if permutations % b == 0]
    return min(pairs, key=lambda p: (abs((1 / p[0]) ** (1 / p[1]) - threshold), -p[0]))
