"""What the agent has been shown so far in an episode, built from trusted observations.

Observations are read with the environment's result models (:mod:`shopbench.env.results`).
Products (title, price, when their details were opened, their attribute values), shops,
prices, the words of every observation (tokenized only on demand) and an index from runs
of title words to the products whose titles contain them.
"""

from __future__ import annotations

import bisect
from functools import lru_cache

from shopbench.env.results import ProductDetails, parse_product_details, parse_search_results
from shopbench.judging.rubric.facts import CallFacts, EvidenceRules, Shown
from shopbench.judging.rubric.grounding import fold, words
from shopbench.records.tools import Tool


class Knowledge:
    """What the agent has been shown so far: products, shops, prices, words, title runs."""

    def __init__(self, rules: EvidenceRules) -> None:
        self.rules = rules
        self.products: dict[str, Shown] = {}
        self.shops: set[str] = set()
        # Observation texts, in order; folded and tokenized only on demand (a search word
        # missing from the request, a judge-directed phrase to exempt): rare for honest
        # agents, so most trajectories never pay for it.
        self._raw: list[str] = []
        self._folded: list[str] = []
        self._words: set[str] = set()
        self._tokenized = 0  # _folded[:_tokenized] are in _words
        # Attribute and SKU values of the viewed products, by their first word.
        self.values: dict[str, set[str]] = {}
        self._prices: list[float] = []
        self._sorted = True
        self.grams: dict[tuple[str, ...], set[str]] = {}  # title run → products with it
        self.listed = 0  # products search results have listed so far
        self.opened = 0  # products whose details were opened so far

    def add_text(self, content: str) -> None:
        """Record an observation's text (folded and tokenized later, if ever)."""
        self._raw.append(content)

    @property
    def texts(self) -> list[str]:
        """The folded observation texts so far."""
        if len(self._folded) < len(self._raw):
            self._folded += [fold(t) for t in self._raw[len(self._folded) :]]
        return self._folded

    def __contains__(self, word: object) -> bool:
        """Whether an observation so far contains `word`."""
        texts = self.texts
        if self._tokenized < len(texts):
            for text in texts[self._tokenized :]:
                self._words.update(words(text))
            self._tokenized = len(texts)
        return word in self._words

    def add_price(self, price: float) -> None:
        """Record a shown price."""
        self._prices.append(price)
        self._sorted = False

    def is_price(self, value: float) -> bool:
        """Whether `value` is within the tolerance of a price shown so far."""
        if not self._sorted:
            self._prices.sort()
            self._sorted = True
        return near(self._prices, value, self.rules.price_tolerance)

    def add_product(self, token: str, title: str, price: float | None, shop: str) -> Shown:
        """Record a shown product (the first showing's title and price count)."""
        known = self.products.get(token)
        if shop:
            self.shops.add(shop)
        if known is not None:
            return known
        shown = self.products[token] = Shown(title=title, price=price, order=len(self.products))
        if price is not None:
            self.add_price(price)
        for gram in _title_grams(title, self.rules.title_ngram):
            owners = self.grams.get(gram)
            if owners is None:
                self.grams[gram] = {token}
            else:
                owners.add(token)
        return shown


@lru_cache(maxsize=65536)
def title_words(title: str) -> tuple[str, ...]:
    """The words of a title (cached: the same titles come back in every episode of a
    round)."""
    return tuple(words(title))


@lru_cache(maxsize=65536)
def _title_grams(title: str, n: int) -> tuple[tuple[str, ...], ...]:
    tw = title_words(title)
    return tuple(zip(*(tw[i:] for i in range(n)), strict=False))


def near(ordered: list[float], value: float, tolerance: float) -> bool:
    """Whether sorted `ordered` holds a number within relative `tolerance` of `value`."""
    i = bisect.bisect_left(ordered, value * (1 - tolerance) - 1e-9)
    return i < len(ordered) and ordered[i] <= value * (1 + tolerance) + 1e-9


def observe(call: CallFacts, content: str, know: Knowledge, turn: int) -> None:
    """Add one trusted observation to what the agent knows, and record what it showed."""
    know.add_text(content)
    if call.error is not None:
        return
    if call.name == Tool.FIND_PRODUCT:
        for h in parse_search_results(content):
            shown = know.add_product(h.product_id, h.title, h.price, h.shop_id)
            if shown.listed is None:
                shown.listed = know.listed
                know.listed += 1
                shown.sold = h.sold_count
                shown.service = h.service
            call.shown.append(h.product_id)
        call.empty = not call.shown
    elif call.name == Tool.VIEW_PRODUCT_INFORMATION:
        for d in parse_product_details(content):
            shown = know.add_product(d.product_id, d.title, d.price, d.shop_id)
            if shown.viewed_turn is None:
                shown.viewed_turn = turn
                shown.opened = know.opened
                know.opened += 1
                shown.details = d
                shown.service = d.service
                shown.values = _values(d)
                for v in shown.values:
                    know.values.setdefault(v.split(" ", 1)[0], set()).add(v)
            call.shown.append(d.product_id)


def _values(details: ProductDetails) -> tuple[str, ...]:
    """The folded attribute and SKU option values of a product's details."""
    raw = [v for vs in details.attributes.values() for v in vs]
    raw += [v for option in details.sku_options.values() for v in option.values()]
    return tuple({v for v in map(_value_text, raw) if len(v) >= 3})


@lru_cache(maxsize=65536)
def _value_text(value: str) -> str:
    # Cached: a catalog has few distinct attribute values.
    return " ".join(words(value))
