"""Multi-item requests: every item from one shop, or a basket that must fit a voucher budget.

Both start the same way — one search per item with its filters, then the closest titles of
each opened and checked — and then differ. A one-shop request looks for a shop that has a
satisfying product for every item: first among what was seen, then by searching the other
items inside each shop that has the first one (the ``shop_id`` filter). A voucher request
looks for the combination of satisfying products the shopper can pay for: the total within
the budget, or the voucher applying (threshold reached, one shop for a shop voucher) and the
discounted total within it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from shopbench.agents.reference.checks import Check, check_all, closeness, worth_opening
from shopbench.agents.reference.prose import listing, money, short_title
from shopbench.agents.reference.query_reading import VoucherNeed
from shopbench.agents.reference.script import Step
from shopbench.agents.reference.session import Moves, Session, needs_sentence
from shopbench.env.results import ProductDetails, ProductHit
from shopbench.records.tools import Tool

MAX_SHOP_TRIES = 8
COMBO_WIDTH = 6  # satisfying candidates per item tried in combinations


@dataclass(slots=True)
class Basket:
    """A choice of one product per item, and what the shopper would pay for it."""

    checks: list[Check]
    pays: float | None

    @property
    def total(self) -> float:
        """The sum of the prices."""
        return sum(c.details.price for c in self.checks)


class _Items:
    """Per item: the products viewed for it and their checks."""

    def __init__(self, s: Session) -> None:
        self.s = s
        self.items = s.reading.items
        self.viewed: list[dict[str, ProductDetails]] = [{} for _ in self.items]
        self.checks: list[list[Check]] = [[] for _ in self.items]

    def add(self, i: int, details: list[ProductDetails]) -> None:
        for d in details:
            self.viewed[i][d.product_id] = d
        self.checks[i] = check_all(self.items[i], list(self.viewed[i].values()))

    def ok(self, i: int, shop: str | None = None) -> list[Check]:
        return [
            c for c in self.checks[i] if c.ok and (shop is None or c.details.shop_id == shop)
        ]

    def to_view(self, i: int, hits: list[ProductHit], n: int) -> list[str]:
        wanted = self.items[i].phrase
        fresh = [h for h in hits if h.product_id not in self.viewed[i]]
        fresh.sort(key=lambda h: closeness(wanted, h.title), reverse=True)
        return [h.product_id for h in fresh if worth_opening(wanted, h.title)][:n]


def _search_all(s: Session, its: _Items, opening: str, sort: str | None = None) -> Moves:
    """One turn searching every item; return the hits per item."""
    calls = [
        (Tool.FIND_PRODUCT, s.search_args(it, s.words_for(it), sort=sort)) for it in its.items
    ]
    short = f"Searching all {len(calls)} items" + (f" sorted by {sort}." if sort else ".")
    results = yield from s.ask(Step(calls=calls, reasoning=s.w.turn([opening], short)))
    return [list(r.hits) for r in results]


def _view_all(s: Session, its: _Items, ids: list[list[str]], why: str) -> Moves:
    """One turn viewing products for several items (one call per item that has any)."""
    calls = [
        (Tool.VIEW_PRODUCT_INFORMATION, {"product_ids": ",".join(x)}) for x in ids if x
    ]
    if not calls:
        return
    n = sum(len(x) for x in ids)
    results = yield from s.ask(
        Step(calls=calls, reasoning=s.w.turn([why], f"Opening {n} candidates."))
    )
    it = iter(results)
    for i, x in enumerate(ids):
        if x:
            its.add(i, list(next(it).details))


def _first_round(s: Session, its: _Items, opening: str, sort: str | None = None) -> Moves:
    """Search every item, then open each item's closest titles."""
    hits = yield from _search_all(s, its, opening, sort)
    per = max(2, 10 // max(1, len(its.items)))
    ids = [its.to_view(i, h, per) for i, h in enumerate(hits)]
    found = listing([f"{len(h)} for item {i + 1}" for i, h in enumerate(hits)])
    why = s.w.pick(
        f"Results came back ({found}).",
        f"The searches returned {found}.",
    ) + " " + s.w.pick(
        "I'll open the closest titles of each item to check the details.",
        "Now the details of the most promising ones, item by item.",
    )
    yield from _view_all(s, its, ids, why)
    return hits


def _status(s: Session, its: _Items) -> str:
    lines = []
    for i in range(len(its.items)):
        ok = its.ok(i)
        if ok:
            shops = len({c.details.shop_id for c in ok})
            c = ok[0]
            lines.append(
                f'item {i + 1}: {len(ok)} fit, e.g. "{short_title(c.details.title, 50)}" at '
                f"{money(c.details.price)} (shop {c.details.shop_id}; {shops} shop(s) in all)"
            )
        elif its.checks[i]:
            c = its.checks[i][0]
            lines.append(
                f'item {i + 1}: nothing fits yet; "{short_title(c.details.title, 50)}" misses '
                f"{listing(c.misses[:2])}"
            )
        else:
            lines.append(f"item {i + 1}: no candidate yet")
    return "So far — " + "; ".join(lines) + "."


def shop_moves(s: Session) -> Moves:
    """Find one shop with a satisfying product for every item; return (picks, all_ok)."""
    its = _Items(s)
    opening = s.w.paragraph([
        needs_sentence(s.w, s.reading, s),
        s.w.pick(
            "I'll search each item with its filters first, then look for a shop that carries"
            " all of them.",
            "Plan: one search per item, then find a common shop.",
        ),
    ])
    hits = yield from _first_round(s, its, opening)
    n = len(its.items)
    common = _common_shop(its)
    if common is None:
        anchor = _anchor(its)
        shops = _shops_to_try(its, anchor, hits[anchor])
        s.note = _status(s, its) + " " + s.w.pick(
            f"No shop has every item yet. I'll take item {anchor + 1}'s shops one by one and"
            " search the other items inside each.",
            f"There is no common shop so far, so I'll check item {anchor + 1}'s shops for the"
            " rest of the list.",
        )
        for shop in shops[:MAX_SHOP_TRIES]:
            if s.turns_left < 3:
                break
            need = [i for i in range(n) if not its.ok(i, shop)]
            calls = [
                (
                    Tool.FIND_PRODUCT,
                    s.search_args(its.items[i], s.words_for(its.items[i]), shop_id=shop),
                )
                for i in need
            ]
            why = s.w.pick(
                f"Searching shop {shop} for {listing([f'item {i + 1}' for i in need])}.",
                f"Let me see whether shop {shop} also sells "
                f"{listing([f'item {i + 1}' for i in need])}.",
            )
            results = yield from s.ask(
                Step(calls=calls, reasoning=s.w.turn([why], f"Trying shop {shop}."))
            )
            ids = [[] for _ in range(n)]
            lacking = []
            for i, r in zip(need, results, strict=True):
                in_shop = [h for h in r.hits if h.shop_id == shop]
                ids[i] = its.to_view(i, in_shop, 3)
                if not ids[i] and not its.ok(i, shop):
                    lacking.append(i)
            if lacking:
                s.note = s.w.pick(
                    f"Shop {shop} has nothing close to item {lacking[0] + 1}, so it's out.",
                    f"No luck: shop {shop} doesn't carry item {lacking[0] + 1}.",
                )
                continue
            yield from _view_all(
                s, its, ids, f"Shop {shop} has candidates for each; checking their details."
            )
            if all(its.ok(i, shop) for i in range(n)):
                common = shop
                break
            missing = [i + 1 for i in range(n) if not its.ok(i, shop)]
            s.note = f"In shop {shop}, item(s) {missing} don't meet the requirements."
    if common is not None:
        picks = [its.ok(i, common)[0] for i in range(n)]
        s.note = s.w.pick(
            f"Shop {common} has every item: "
            + "; ".join(s.describe_check(c) for c in picks) + ".",
            f"Found a shop ({common}) with all {n} items that fit: "
            + "; ".join(s.describe_check(c) for c in picks) + ".",
        ) + " " + _argue(s, its, picks)
        return picks, True
    s.note = _status(s, its)
    return [(its.ok(i) or its.checks[i] or [None])[0] for i in range(n)], False


def _runner_up(its: _Items, picks: list[Check]) -> tuple[int, Check] | None:
    """The first item that had another candidate, and that candidate."""
    for i, pick in enumerate(picks):
        others = [c for c in its.checks[i] if c.details.product_id != pick.details.product_id]
        if others:
            return i, others[0]
    return None


def _argue(s: Session, its: _Items, picks: list[Check]) -> str:
    """The comparison with a runner-up that argues the choice (the terse shopper's clause is
    set too)."""
    other = _runner_up(its, picks)
    s.brief = s.brief_pair(picks[other[0]], other[1]) if other else s.brief_pair(picks[0], None)
    return _alternatives(other)


def _alternatives(other: tuple[int, Check] | None) -> str:
    """A comparison with the runner-up of the first item, so the choice is argued."""
    if other is None:
        return ""
    i, o = other
    why = "it is from another shop" if o.ok else f"it misses {listing(o.misses[:2])}"
    return (
        f'For item {i + 1} I also considered "{short_title(o.details.title, 50)}" at '
        f"{money(o.details.price)}, but {why}."
    )


def _common_shop(its: _Items) -> str | None:
    shop_sets = [{c.details.shop_id for c in its.ok(i)} for i in range(len(its.items))]
    common = set.intersection(*shop_sets) if shop_sets else set()
    if not common:
        return None
    # The shop of the best-ranked candidate of the first item wins among common ones.
    for c in its.ok(0):
        if c.details.shop_id in common:
            return c.details.shop_id
    return sorted(common)[0]


def _anchor(its: _Items) -> int:
    """The item whose satisfying products come from the fewest shops (fewest to try)."""
    def key(i: int) -> tuple[int, int, int]:
        shops = {c.details.shop_id for c in its.ok(i)}
        return (0 if shops else 1, len(shops), i)

    return min(range(len(its.items)), key=key)


def _shops_to_try(its: _Items, anchor: int, hits: list[ProductHit]) -> list[str]:
    shops: list[str] = []
    for c in its.ok(anchor):
        if c.details.shop_id not in shops:
            shops.append(c.details.shop_id)
    wanted = its.items[anchor].phrase
    for h in sorted(hits, key=lambda h: closeness(wanted, h.title), reverse=True):
        if worth_opening(wanted, h.title) and h.shop_id not in shops:
            shops.append(h.shop_id)
    return shops


# -- voucher ---------------------------------------------------------------------------------


def best_basket(its: _Items, voucher: VoucherNeed, shop: str | None = None) -> Basket | None:
    """The satisfying combination the shopper pays least for, within the budget; None if
    no combination of the candidates fits."""
    lists = [sorted(its.ok(i, shop), key=lambda c: c.details.price)[:COMBO_WIDTH]
             for i in range(len(its.items))]
    if not all(lists):
        return None
    best: Basket | None = None
    for combo in itertools.product(*lists):
        total = sum(c.details.price for c in combo)
        shops = len({c.details.shop_id for c in combo})
        pays = voucher.pays(total, shops)
        if pays is not None and (best is None or best.pays is None or pays < best.pays):
            best = Basket(checks=list(combo), pays=pays)
    return best


def _basket_words(s: Session, b: Basket, v: VoucherNeed) -> str:
    items = "; ".join(s.describe_check(c) for c in b.checks)
    total = b.total
    shops = len({c.details.shop_id for c in b.checks})
    if total <= v.budget:
        money_line = f"the total {money(total)} is already within the {money(v.budget)} budget"
    else:
        money_line = (
            f"the total {money(total)} reaches the {money(v.threshold)} threshold"
            + (" with everything from one shop" if v.scope == "shop" and shops == 1 else "")
            + f", and after the {money(v.discount(total))} discount I pay "
            f"{money(b.pays or total)}, within {money(v.budget)}"
        )
    return f"Basket: {items}. Checking the money: {money_line}."


def voucher_moves(s: Session) -> Moves:
    """Find satisfying products whose combination fits the budget; return (picks, all_ok)."""
    v = s.reading.voucher
    assert v is not None
    its = _Items(s)
    n = len(its.items)
    opening = s.w.paragraph([
        needs_sentence(s.w, s.reading, s),
        s.w.pick(
            "I'll find candidates for each item first, then work out a combination that fits"
            " the budget.",
            "First the candidates per item, then the arithmetic with the voucher.",
        ),
    ])
    hits = yield from _first_round(s, its, opening)
    basket = best_basket(its, v)
    for sort in ("priceasc", "pricedesc"):
        if basket is not None or s.turns_left < 4:
            break
        s.note = _status(s, its) + " " + s.w.pick(
            f"No combination fits the budget yet; I'll search again sorted by {sort} to find"
            " other price points.",
            f"The numbers don't work yet, so let me look at the {sort} end of each search.",
        )
        more = yield from _first_round(s, its, "", sort=sort)
        hits = [a + b for a, b in zip(hits, more, strict=True)]
        basket = best_basket(its, v)
    if basket is None and (v.scope == "shop" or n > 1) and s.turns_left >= 4:
        anchor = _anchor(its)
        for shop in _shops_to_try(its, anchor, hits[anchor])[:MAX_SHOP_TRIES]:
            if s.turns_left < 3:
                break
            need = [i for i in range(n) if len(its.ok(i, shop)) < 2]
            calls = [
                (
                    Tool.FIND_PRODUCT,
                    s.search_args(its.items[i], s.words_for(its.items[i]), shop_id=shop),
                )
                for i in need
            ]
            results = yield from s.ask(
                Step(
                    calls=calls,
                    reasoning=s.w.turn(
                        [f"Buying everything from shop {shop} might let the voucher apply;"
                         " searching it for the other items."],
                        f"Trying shop {shop}.",
                    ),
                )
            )
            ids = [[] for _ in range(n)]
            for i, r in zip(need, results, strict=True):
                ids[i] = its.to_view(i, [h for h in r.hits if h.shop_id == shop], 3)
            yield from _view_all(s, its, ids, f"Checking shop {shop}'s candidates.")
            basket = best_basket(its, v, shop)
            if basket is not None:
                break
    if basket is not None:
        s.note = _basket_words(s, basket, v) + " " + _argue(s, its, basket.checks)
        return basket.checks, True
    s.note = _status(s, its) + " I can't make the budget work with what I found."
    cheapest = [
        (sorted(its.ok(i), key=lambda c: c.details.price) or its.checks[i] or [None])[0]
        for i in range(n)
    ]
    return cheapest, False
