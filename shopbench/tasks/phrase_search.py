"""A slot's search: the hits for the words a shopper names an item with, under the slot's
own filters. Drafting proves a target findable with it; satisfying sets
(:mod:`shopbench.tasks.satisfy`) are drawn from its results. It reads no task, only a slot.
"""

from __future__ import annotations

from typing import Literal

from shopbench.catalog.search.filters import PriceRange
from shopbench.catalog.search.index import SearchIndex, TitledHit
from shopbench.outcome.spec import Slot

SATISFY_WINDOW = 100
"""Search results examined per slot."""


def slot_price_range(slot: Slot) -> PriceRange | None | Literal[False]:
    """The inclusive price range every bound of the slot allows: None when unbounded,
    False when the bounds contradict each other (only the exact target can pass then)."""
    lo: float | None = None
    hi: float | None = None
    for b in slot.price or []:
        if b.lo is not None and b.mode != "less than":
            lo = b.lo if lo is None else max(lo, b.lo)
        if b.hi is not None and b.mode != "greater than":
            hi = b.hi if hi is None else min(hi, b.hi)
    if lo is None and hi is None:
        return None
    if lo is not None and hi is not None and lo > hi:
        return False
    return (lo, hi)


def phrase_search(index: SearchIndex, slot: Slot, phrase: str, window: int) -> list[TitledHit]:
    """The top `window` hits for `phrase` under the slot's own filters (price bound,
    services), best first, as ids and titles; empty when the slot's price bounds contradict
    each other."""
    price = slot_price_range(slot)
    if price is False:
        return []
    return index.search_titles(phrase, price=price, service=list(slot.service or []), window=window)
