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


def _signature(hashes: np.ndarray, permutations: int) -> list[int]:
    if hashes.size == 0:
        return [2**32] * permutations
    a, b = _coefficients(permutations)
    values = (np.outer(a, hashes) + b[:, None]) % _PRIME
    return values.min(axis=1).astype(np.int64).tolist()


def minhash(shingles: Iterable[str], permutations: int) -> list[int]:
    """The MinHash signature of a set of `shingles` (all values 2**32 for an empty set)."""
    hashes = np.fromiter(
        (zlib.crc32(s.encode("utf-8", "surrogatepass")) for s in shingles), dtype=np.uint64
    )
    return _signature(np.unique(hashes), permutations)


_MIX = np.uint64(0x9E3779B1)  # odd: each word's hash is spread before the next is added
_LOW = np.uint64(0xFFFFFFFF)


def minhash_words(words: list[str], n: int, permutations: int) -> list[int]:
    """The MinHash signature of the word `n`-grams of `words` (the whole list when it is
    shorter than `n`), each n-gram hashed from its words' hashes without building it."""
    if not words:
        return _signature(np.empty(0, dtype=np.uint64), permutations)
    codes = {w: zlib.crc32(w.encode("utf-8", "surrogatepass")) for w in set(words)}
    h = np.fromiter(map(codes.__getitem__, words), dtype=np.uint64, count=len(words))
    k = min(n, len(words))
    grams = h[: len(h) - k + 1].copy()
    for i in range(1, k):
        grams = ((grams * _MIX) & _LOW) ^ h[i : len(h) - k + 1 + i]
    return _signature(np.unique(grams), permutations)


def bands_for(permutations: int, threshold: float) -> tuple[int, int]:
    """(bands, rows per band) with ``bands * rows == permutations`` whose LSH threshold
    ``(1/bands)^(1/rows)`` is nearest `threshold`."""
    pairs = [(b, permutations // b) for b in range(1, permutations + 1) if permutations % b == 0]
    return min(pairs, key=lambda p: (abs((1 / p[0]) ** (1 / p[1]) - threshold), -p[0]))
