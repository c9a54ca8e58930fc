"""Seed derivation and keyed permutations for the generator.

Identifiers must be unique, stable for a seed, and must not reveal generation order (a
miner who sees product 1000000007 must not learn it was the 7th generated). A Feistel
network keyed by the seed permutes [0, 2^bits) bijectively; cycle-walking restricts it to
any smaller domain while staying a bijection. Python's `hash()` is never used: it is
randomised per process.
"""

from __future__ import annotations

import hashlib

import numpy as np

_MASK64 = (1 << 64) - 1
_ROUNDS = 4


def derive_seed(seed: int, *parts: str | int) -> int:
    """A 64-bit seed for one purpose, from the catalog seed and a label path.

    Same inputs give the same value in every process and on every platform; different labels
    give independent streams.
    """
    text = "|".join([str(seed), *map(str, parts)])
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


class KeyedPermutation:
    """A keyed bijection of [0, domain): `perm(i)` is unique per i and looks random."""

    def __init__(self, key: int, domain: int) -> None:
        if domain < 2:
            raise ValueError(f"permutation domain must be at least 2, got {domain}")
        self.domain = domain
        bits = max(2, (domain - 1).bit_length())
        bits += bits % 2  # balanced halves
        self._half = bits // 2
        self._half_mask = (1 << self._half) - 1
        self._keys = tuple(derive_seed(key, "round", r) for r in range(_ROUNDS))

    def _round(self, r: int, k: int) -> int:
        h = ((r ^ k) * 0x9E3779B97F4A7C15) & _MASK64
        h ^= h >> 31
        h = (h * 0xBF58476D1CE4E5B9) & _MASK64
        h ^= h >> 29
        return h & self._half_mask

    def _feistel(self, x: int) -> int:
        left, right = x >> self._half, x & self._half_mask
        for k in self._keys:
            left, right = right, left ^ self._round(right, k)
        return (left << self._half) | right

    def __call__(self, i: int) -> int:
        """The image of i; ValueError when i is outside [0, domain)."""
        if not 0 <= i < self.domain:
            raise ValueError(f"index {i} outside permutation domain [0, {self.domain})")
        x = self._feistel(i)
        while x >= self.domain:  # cycle-walk back into the domain
            x = self._feistel(x)
        return x

    def many(self, indices: np.ndarray) -> np.ndarray:
        """The images of many indices at once (uint64); equal to calling the permutation on each."""
        x = np.asarray(indices, dtype=np.uint64)
        if x.size and (int(x.max()) >= self.domain):
            raise ValueError(f"an index is outside permutation domain [0, {self.domain})")
        out = self._feistel_many(x)
        todo = out >= self.domain
        while todo.any():
            out[todo] = self._feistel_many(out[todo])
            todo = out >= self.domain
        return out

    def _feistel_many(self, x: np.ndarray) -> np.ndarray:
        half = np.uint64(self._half)
        mask = np.uint64(self._half_mask)
        left, right = x >> half, x & mask
        for k in self._keys:
            h = (right ^ np.uint64(k)) * np.uint64(0x9E3779B97F4A7C15)  # wraps mod 2^64
            h ^= h >> np.uint64(31)
            h = h * np.uint64(0xBF58476D1CE4E5B9)
            h ^= h >> np.uint64(29)
            left, right = right, left ^ (h & mask)
        return (left << half) | right


PRODUCT_ID_BASE = 1_000_000_000  # 10-digit ids: 1000000000..9999999999
PRODUCT_ID_DOMAIN = 9_000_000_000
SHOP_ID_BASE = 10_000_000  # 8-9 digit ids: 10000000..999999999
SHOP_ID_DOMAIN = 990_000_000
BASE_ID_DOMAIN = 1 << 40  # base ids print as 13 digits


def product_ids(seed: int) -> KeyedPermutation:
    """Product number i maps to id PRODUCT_ID_BASE + perm(i)."""
    return KeyedPermutation(derive_seed(seed, "product-id"), PRODUCT_ID_DOMAIN)


def shop_ids(seed: int) -> KeyedPermutation:
    """Shop number s maps to id SHOP_ID_BASE + perm(s)."""
    return KeyedPermutation(derive_seed(seed, "shop-id"), SHOP_ID_DOMAIN)


def base_ids(seed: int) -> KeyedPermutation:
    """The j-th base product of the chunk starting at product `start` maps to perm(start + j)."""
    return KeyedPermutation(derive_seed(seed, "base-id"), BASE_ID_DOMAIN)
