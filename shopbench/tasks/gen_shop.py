"""Shop tasks: 2-4 products from one shop, each slot with its own constraints.

The slot count follows ShoppingBench's test set (2/3/4 slots in about 36/34/30%). The items
are distinct base products of one shop whose groups are all eligible, so the task is
solvable in that shop; another shop selling all of them solves it too.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

from shopbench.catalog.schema import Product
from shopbench.tasks.draft import Draft, DraftResult, Rejection, Sampler
from shopbench.tasks.gen_product import PRODUCT_ODDS, ConstraintOdds, derive_slot, slot_text
from shopbench.tasks.queries import write_shop

SHOP_SLOTS: dict[int, float] = {2: 0.36, 3: 0.34, 4: 0.30}
"""Weights of the number of slots of a shop task."""


def weighted(table: dict[int, float], rng: random.Random) -> int:
    """One key of `table` drawn with its weight."""
    keys = sorted(table)
    return rng.choices(keys, weights=[table[k] for k in keys])[0]


def base_key(p: Product) -> str:
    """The base product a listing sells (its title when the catalog has no base ids)."""
    return p.base_id or p.title.strip().casefold()


def distinct_products(candidates: Iterable[Product], k: int) -> list[Product] | None:
    """The first `k` candidates with distinct base products, or None if there are fewer
    (candidates past the `k`-th distinct one are never drawn from the iterable)."""
    chosen: list[Product] = []
    seen: set[str] = set()
    for p in candidates:
        key = base_key(p)
        if key not in seen:
            seen.add(key)
            chosen.append(p)
            if len(chosen) == k:
                return chosen
    return None


def shop_products(s: Sampler, k: int, rng: random.Random) -> list[Product] | Rejection:
    """`k` distinct base products of one randomly drawn qualifying shop."""
    rows = s.pool.sample_shop_rows(k, rng)
    if rows is None:
        return Rejection(reason=f"no shop has {k} eligible products")
    chosen = distinct_products(s.products(rows), k)
    if chosen is None:
        return Rejection(reason=f"the drawn shop has fewer than {k} distinct base products")
    return chosen


def draft_shop(s: Sampler, rng: random.Random, odds: ConstraintOdds = PRODUCT_ODDS) -> DraftResult:
    """One shop task draft, or why the attempt failed."""
    k = weighted(SHOP_SLOTS, rng)
    got = shop_products(s, k, rng)
    if isinstance(got, Rejection):
        return got
    slots = [derive_slot(p, rng, odds)[0] for p in got]
    texts = [slot_text(sl, p, rng, s) for sl, p in zip(slots, got, strict=True)]
    query = write_shop(texts, rng)
    return Draft(
        intent="shop", query=query, slots=slots, targets=got, phrases=[t.phrase for t in texts]
    )
