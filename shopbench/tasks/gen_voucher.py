"""Voucher tasks: 1-4 products, a budget and a voucher, with ShoppingBench's arithmetic.

As in ShoppingBench's test set: a platform voucher (about 52%) applies to any products, a
shop voucher only to products of one shop (so its tasks have 2-4 items from one shop); the
item counts are drawn per voucher type so that 1/2/3/4 items come out at about 9/28/32/31%.
The threshold is U[0.1, 0.9] × the targets' total; a fixed voucher (about 45%) takes off
U[0.1, 0.5] × the threshold, a percentage voucher 10-50% capped at U[0.2, 1.0] × the
threshold; the budget is the price after the voucher, plus up to 10%, rounded up. Slots carry
no price bound (the budget bounds prices), as in ShoppingBench.
"""

from __future__ import annotations

import math
import random
from typing import Literal

from shopbench.catalog.schema import Product
from shopbench.outcome.spec import Voucher
from shopbench.tasks.draft import Draft, DraftResult, Rejection, Sampler
from shopbench.tasks.gen_product import VOUCHER_ODDS, ConstraintOdds, derive_slot, slot_text
from shopbench.tasks.gen_shop import distinct_products, shop_products, weighted
from shopbench.tasks.queries import write_voucher

PLATFORM_SHARE = 0.52
PERCENTAGE_SHARE = 0.55
PLATFORM_ITEMS: dict[int, float] = {1: 0.17, 2: 0.31, 3: 0.32, 4: 0.20}
SHOP_ITEMS: dict[int, float] = {2: 0.25, 3: 0.32, 4: 0.43}


def make_voucher(
    total: float, voucher_type: Literal["platform", "shop"], rng: random.Random
) -> Voucher | None:
    """A voucher and budget that the products totalling `total` satisfy (None if total < 2).

    The price after the voucher is computed with the grader's own operations, so the
    targets pass the budget check exactly.
    """
    if total < 2:
        return None
    threshold = min(max(1, round(total * rng.uniform(0.1, 0.9))), math.floor(total))
    if rng.random() < PERCENTAGE_SHARE:
        discount = round(rng.uniform(0.1, 0.5), 2)
        cap = max(1, round(threshold * rng.uniform(0.2, 1.0)))
        pct = total * (1 - discount)
        after = total - cap if total - cap > pct else pct
        fields: dict[str, object] = {
            "discount_type": "percentage", "discount": discount, "cap": cap,
        }  # fmt: skip
    else:
        face = max(1, round(threshold * rng.uniform(0.1, 0.5)))
        after = total - face
        fields = {"discount_type": "fixed", "face_value": face}
    budget = math.ceil(after * rng.uniform(1.0, 1.1))
    return Voucher.model_validate(
        {
            "voucher_type": voucher_type,
            "threshold": threshold,
            **fields,
            "price_after_voucher": round(after, 4),
            "budget": max(budget, 1),
        }
    )


def _platform_products(s: Sampler, k: int, rng: random.Random) -> list[Product] | Rejection:
    # Every row is drawn first (the generator's state must not depend on what is loaded);
    # products are then loaded only until `k` distinct ones are found.
    rows = [s.pool.sample_row(rng) for _ in range(k + 4)]
    chosen = distinct_products(s.products([r for r in rows if r is not None]), k)
    if chosen is None:
        return Rejection(reason=f"could not draw {k} distinct eligible products")
    return chosen


def draft_voucher(
    s: Sampler, rng: random.Random, odds: ConstraintOdds = VOUCHER_ODDS
) -> DraftResult:
    """One voucher task draft, or why the attempt failed."""
    voucher_type: Literal["platform", "shop"] = (
        "platform" if rng.random() < PLATFORM_SHARE else "shop"
    )
    if voucher_type == "platform":
        k = weighted(PLATFORM_ITEMS, rng)
        got = _platform_products(s, k, rng)
    else:
        k = weighted(SHOP_ITEMS, rng)
        got = shop_products(s, k, rng)
    if isinstance(got, Rejection):
        return got
    # Summed in slot order from 0, as the budget check sums.
    voucher = make_voucher(sum((p.price for p in got), 0.0), voucher_type, rng)
    if voucher is None:
        return Rejection(reason="the items are too cheap for a voucher (total < 2)")
    slots = [derive_slot(p, rng, odds)[0] for p in got]
    texts = [slot_text(sl, p, rng, s) for sl, p in zip(slots, got, strict=True)]
    return Draft(
        intent="voucher",
        query=write_voucher(texts, voucher, rng),
        slots=slots,
        targets=got,
        voucher=voucher,
        phrases=[t.phrase for t in texts],
    )
