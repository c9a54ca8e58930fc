"""Keys and values of earlier prompts, kept so a turn prefills only what is new.

In a view whose history is never rewritten (``compact`` without a window), each turn's
prompt is the last turn's prompt, the reply and the new tool results: everything before the
new part was already computed. :class:`KVStore` keeps, per row a batch generated, the keys
and values of its prompt and reply (one entry a sequence, least recently used first out,
bounded by the tokens held); :meth:`KVStore.longest` finds the kept sequence that shares the
longest opening with a new prompt — the same episode's last turn, or, for an episode's first
turn, any episode's shared system prompt — and the engine starts that row from it.

Entries are matched on token ids alone, so a template that renders an earlier turn
differently from how it was generated simply matches less: the result never depends on the
store, only the work does.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(slots=True)
class KVEntry:
    """One kept sequence: its token ids and, per layer, its keys and values (heads, tokens,
    dim) on the CPU."""

    ids: np.ndarray
    layers: list[tuple[Any, Any]]

    @property
    def tokens(self) -> int:
        """How many tokens the entry holds."""
        return int(self.ids.shape[0])


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """How many leading ids `a` and `b` share."""
    n = min(a.shape[0], b.shape[0])
    if n == 0:
        return 0
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if differ.size else n


class KVStore:
    """Kept sequences, at most `max_tokens` tokens in all (the least recently used go)."""

    def __init__(self, max_tokens: int) -> None:
        self.max_tokens = max_tokens
        self.tokens = 0
        self._entries: OrderedDict[int, KVEntry] = OrderedDict()
        self._next = 0

    def __len__(self) -> int:
        return len(self._entries)

    def longest(self, prompt: np.ndarray) -> tuple[KVEntry | None, int]:
        """The entry sharing the longest opening with `prompt`, and how long it is."""
        best: tuple[KVEntry | None, int, int] = (None, 0, -1)
        for key, entry in self._entries.items():
            n = common_prefix(entry.ids, prompt)
            if n > best[1]:
                best = (entry, n, key)
        if best[0] is not None:
            self._entries.move_to_end(best[2])
        return best[0], best[1]

    def put(self, entry: KVEntry) -> None:
        """Keep `entry`; drop the entries it extends (their ids are its opening), then the
        least recently used until the store fits."""
        if entry.tokens > self.max_tokens:
            return
        for key in [k for k, e in self._entries.items()
                    if e.tokens <= entry.tokens and common_prefix(e.ids, entry.ids) == e.tokens]:
            self.tokens -= self._entries.pop(key).tokens
        self._entries[self._next] = entry
        self._next += 1
        self.tokens += entry.tokens
        while self.tokens > self.max_tokens and self._entries:
            _, old = self._entries.popitem(last=False)
            self.tokens -= old.tokens
