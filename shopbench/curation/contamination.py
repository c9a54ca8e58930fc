"""Contamination: does a trajectory's query overlap a test set's?

A test set is any task file ``read_tasks`` reads (ShoppingBench's test files as ``tasks
import`` reads them, or a task file of ours such as the held-out split). Queries are folded
(lower case, accents removed) into words; a query's word n-grams are looked up in an index
of every test query's n-grams, and its overlap with one test query is the share of its own
n-grams that test query also has (containment). At or above the threshold, it is
contaminated. A query shorter than n words is one n-gram of all its words.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from pathlib import Path

from shopbench.curation.errors import CurationError
from shopbench.errors import ShopbenchError
from shopbench.tasks.io import read_tasks

_WORD = re.compile(r"[^\W_]+")


def _fold(text: str) -> list[str]:
    decomposed = unicodedata.normalize("NFKD", text.lower())
    plain = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return _WORD.findall(plain)


def ngrams(text: str, n: int) -> set[int]:
    """The word `n`-grams of `text`, as 64-bit hashes."""
    words = _fold(text)
    if not words:
        return set()
    if len(words) < n:
        grams = [" ".join(words)]
    else:
        grams = [" ".join(words[i : i + n]) for i in range(len(words) - n + 1)]
    return {
        int.from_bytes(hashlib.blake2b(g.encode(), digest_size=8).digest(), "big") for g in grams
    }


class TestSet:
    """The n-gram index of one test set's queries."""

    __test__ = False  # not a pytest class

    def __init__(self, name: str, queries: list[str], n: int) -> None:
        self.name = name
        self.n = n
        self.size = len(queries)
        self._index: dict[int, list[int]] = {}
        for i, q in enumerate(queries):
            for g in ngrams(q, n):
                self._index.setdefault(g, []).append(i)

    @classmethod
    def load(cls, path: str | Path, n: int) -> TestSet:
        """The queries of the task file at `path`; CurationError when it cannot be read or
        holds no task."""
        try:
            loaded = read_tasks(path)
        except ShopbenchError as e:
            raise CurationError(f"contamination test set: {e}") from None
        if not loaded.tasks:
            raise CurationError(f"contamination test set {path}: no tasks in it")
        return cls(str(path), [t.query for t in loaded.tasks], n)

    def overlap(self, query: str) -> float:
        """The largest share of `query`'s n-grams that one test query also has."""
        grams = ngrams(query, self.n)
        if not grams:
            return 0.0
        hits: Counter[int] = Counter()
        for g in grams:
            for i in self._index.get(g, ()):
                hits[i] += 1
        return max(hits.values(), default=0) / len(grams)
