"""Constraints from a target product, with ShoppingBench's probabilities, and product tasks.

A slot always asks for the target's title; then, each with probability ½ (configurable):
one of the target's SKU options (all its key/value pairs), each attribute (one of its values),
each of the target's services, and one price bound. Price bounds are whole pesos around the
target's price, often rounded as a shopper would ("under 500"), and always include it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field

from shopbench.catalog.schema import Product
from shopbench.catalog.search.filters import WINDOW
from shopbench.outcome.spec import PriceBound, Slot
from shopbench.tasks.describe import PRODUCT_PHRASE_ODDS, PhraseOdds, findable_phrase
from shopbench.tasks.draft import Draft, DraftResult, Rejection, Sampler
from shopbench.tasks.queries import SlotText, write_product
from shopbench.tasks.satisfy import slot_pairs


class ConstraintOdds(BaseModel):
    """The probability of each optional constraint of a slot (ShoppingBench: ½ each)."""

    model_config = ConfigDict(frozen=True)

    sku: float = Field(default=0.5, ge=0, le=1, description="ask for one SKU option")
    attribute: float = Field(default=0.4, ge=0, le=1, description="ask for each attribute")
    service: float = Field(default=0.5, ge=0, le=1, description="ask for each service")
    price: float = Field(default=0.5, ge=0, le=1, description="ask for one price bound")
    price_modes: dict[str, float] = Field(
        default_factory=lambda: {"greater than": 0.45, "between": 0.35, "less than": 0.2},
        description="weights of the price modes",
    )


UNASKED_ATTRIBUTES = frozenset({"brand"})
"""Attributes never asked: the title already names the brand."""

PRODUCT_ODDS = ConstraintOdds()
# ShoppingBench's voucher slots never carry a price bound: the budget bounds the prices.
VOUCHER_ODDS = ConstraintOdds(price=0.0)


def _nice_step(x: float) -> int:
    """A round step a shopper would use for an amount of this size."""
    if x < 100:
        return 5
    if x < 1000:
        return 50
    if x < 10_000:
        return 100
    return 1000


def price_bound(price: float, rng: random.Random, mode: str) -> PriceBound | None:
    """A whole-peso bound of `mode` that `price` satisfies; None when none fits (price < 2)."""
    if price < 2:
        return None
    rounded = rng.random() < 0.5
    hi = math.ceil(price * rng.uniform(1.05, 1.8))
    lo = math.floor(price * rng.uniform(0.3, 0.95))
    if rounded:
        hi = math.ceil(hi / _nice_step(hi)) * _nice_step(hi)
        lo = math.floor(lo / _nice_step(lo)) * _nice_step(lo)
    lo = max(lo, 1)
    if mode == "less than":
        return PriceBound(mode="less than", hi=hi)
    if mode == "greater than":
        return PriceBound(mode="greater than", lo=lo)
    return PriceBound(mode="between", lo=lo, hi=hi)


def derive_slot(
    target: Product, rng: random.Random, odds: ConstraintOdds = PRODUCT_ODDS
) -> tuple[Slot, list[tuple[str, str]]]:
    """A slot the target satisfies, and the (key, value) pairs it asks for, in slot order.

    Pairs never repeat a key: a value picked from the SKU option is not asked again as an
    attribute (the grader reads both from the same pool).
    """
    sku: dict[str, str] | None = None
    if target.sku_options and rng.random() < odds.sku:
        key = rng.choice(sorted(target.sku_options, key=_option_order))
        sku = dict(target.sku_options[key]) or None
    taken = set(sku or {})
    attributes: list[dict[str, list[str]]] = []
    for k in sorted(target.attributes):
        values = [v for v in target.attributes[k] if v]
        if k in taken or k in UNASKED_ATTRIBUTES or not values or rng.random() >= odds.attribute:
            continue
        attributes.append({k: [rng.choice(values)]})
        taken.add(k)
    services = [s for s in target.service if rng.random() < odds.service]
    price = None
    if rng.random() < odds.price:
        modes = sorted(odds.price_modes)
        mode = rng.choices(modes, weights=[odds.price_modes[m] for m in modes])[0]
        bound = price_bound(target.price, rng, mode)
        price = [bound] if bound else None
    slot = Slot(
        product_id=target.product_id,
        title=[target.title],
        sku_options=[sku] if sku else None,
        attributes=attributes or None,
        price=price,
        service=services or None,
    )
    return slot, slot_pairs(slot)


def _option_order(key: str) -> tuple[int, str]:
    return (int(key), key) if key.isdigit() else (1 << 30, key)


def finder(s: Sampler, slot: Slot, target: Product) -> Callable[[str], bool]:
    """Whether a phrase puts `target` in the top 50 under the slot's own filters."""

    def finds(phrase: str) -> bool:
        return any(h.product_id == target.product_id for h in s.slot_hits(slot, phrase)[:WINDOW])

    return finds


def slot_text(
    slot: Slot,
    target: Product,
    rng: random.Random,
    s: Sampler,
    *,
    odds: PhraseOdds = PRODUCT_PHRASE_ODDS,
) -> SlotText:
    """What the query says about a slot: a shopper's description of the target that finds it
    (drawn with `rng`, :func:`~shopbench.tasks.describe.findable_phrase`) and every
    constraint."""
    return SlotText(
        phrase=findable_phrase(
            target.title, rng, finder(s, slot, target), brand=target.brand,
            leaf=target.leaf, odds=odds,
        ),  # fmt: skip
        leaf=target.leaf.lower(),
        pairs=slot_pairs(slot),
        price=slot.price[0] if slot.price else None,
        services=list(slot.service or []),
    )


def constraint_kinds(slot: Slot) -> list[str]:
    """The kinds of constraint a slot asks for, e.g. ``["title", "price:between", "color"]``."""
    kinds = ["title"]
    kinds += [f"pair:{k}" for k, _ in slot_pairs(slot)]
    kinds += [f"price:{b.mode}" for b in slot.price or []]
    kinds += [f"service:{s}" for s in slot.service or []]
    return kinds


def draft_product(
    s: Sampler, rng: random.Random, odds: ConstraintOdds = PRODUCT_ODDS
) -> DraftResult:
    """One product task draft: a random eligible target and constraints derived from it."""
    target = s.random_product(rng)
    if target is None:
        return Rejection(reason="no eligible product")
    slot, _ = derive_slot(target, rng, odds)
    text = slot_text(slot, target, rng, s)
    query = write_product(text, rng)
    return Draft(
        intent="product", query=query, slots=[slot], targets=[target], phrases=[text.phrase]
    )
