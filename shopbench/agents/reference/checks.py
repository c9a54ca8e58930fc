"""Checking a viewed product against what the request asked for, as a careful shopper does.

Title: the share of the item's words the product title carries (content words, sellers'
noise ignored): a request names an item by a few words, and a listing that carries them
fits the description; among those that fit, the closer title (Dice overlap) ranks first.
Price and services: against the bound and the services read from the request. Attribute and
SKU values: the request's values for the keys the product shows, all met by the product's
attributes together with one of its SKU options (the option the shopper would pick).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache

from shopbench.agents.reference.prose import money, price_words
from shopbench.agents.reference.query_reading import (
    SERVICE_NAMES,
    ItemNeed,
    requested_pairs,
    states_value,
)
from shopbench.env.results import ProductDetails

TITLE_OK = 0.75
"""A title carrying less than this share of the item's words names another product."""
KNOWLEDGE_TITLE_OK = 0.8
"""Knowledge requests are held to a closer title (as ShoppingBench grades them)."""
VIEW_MIN = 0.5
"""Titles carrying less than this share of the item's words are not worth opening."""

_WORD = re.compile(r"[^\W_]+")
# What sellers add to a title that says nothing about the product: phrases, then words.
_NOISE_PHRASES = re.compile(
    r"\b(?:on hand|best seller|best selling|fast delivery|fast shipping|good quality|"
    r"high quality|top quality|direct from supplier|on sale|hot sale|hot selling|ready stock|"
    r"in stock|local stock|free shipping|free gift|new arrivals?|same day delivery|"
    r"buy 1 take 1|limited stock|brand new|official store)\b"
)
_IGNORED = frozenset({
    "for", "with", "and", "the", "of", "a", "an", "to", "by", "from", "or", "in", "on", "at",
    "original", "authentic", "genuine", "new", "sale", "sealed", "cod", "legit", "promo",
    "cheap", "trending", "bestseller", "onhand", "sulit", "viral", "preorder", "brandnew",
    "orig",
})  # fmt: skip
_PACK = re.compile(r"^\d+(?:pcs|pc|pieces|pack|packs|x)$|^x\d+$")


@lru_cache(maxsize=16384)
def content_words(text: str) -> frozenset[str]:
    """The words of a title that say what the product is (folded, singular, noise gone)."""
    folded = unicodedata.normalize("NFKD", text.casefold())
    folded = "".join(ch for ch in folded if not unicodedata.combining(ch))
    folded = _NOISE_PHRASES.sub(" ", folded)
    out: set[str] = set()
    for w in _WORD.findall(folded):
        if w in _IGNORED or _PACK.match(w):
            continue
        out.add(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w)
    return frozenset(out)


Wanted = str | tuple[str, ...]
"""The words an item is named with, or several namings of it (any one may match)."""


def _namings(wanted: Wanted) -> tuple[str, ...]:
    return (wanted,) if isinstance(wanted, str) else wanted


def title_score(wanted: Wanted, title: str) -> float:
    """Dice overlap of the content words of `wanted` and `title` (1.0 = same words); the
    best over the namings when several are given."""
    b = content_words(title)
    best = 0.0
    for naming in _namings(wanted):
        a = content_words(naming)
        if a and b:
            best = max(best, 2 * len(a & b) / (len(a) + len(b)))
    return best


def title_recall(wanted: Wanted, title: str) -> float:
    """The share of the item's words the title carries, for its fullest naming (the one
    with the most words: a title that has them all is the closest to what was asked)."""
    a = max((content_words(n) for n in _namings(wanted)), key=len)
    return len(a & content_words(title)) / len(a) if a else 0.0


def closeness(wanted: Wanted, title: str) -> tuple[float, float]:
    """How close a title is to the item, greater is closer: the share of the item's words it
    carries, then the Dice overlap (the fewer other words, the closer)."""
    return (title_recall(wanted, title), title_score(wanted, title))


def worth_opening(wanted: Wanted, title: str) -> bool:
    """Whether a listing's title carries enough of the item's words to open it."""
    return title_recall(wanted, title) >= VIEW_MIN


def keys_of(details: list[ProductDetails]) -> set[str]:
    """Every attribute and SKU key the viewed products show."""
    keys: set[str] = set()
    for d in details:
        keys.update(d.attributes)
        for option in d.sku_options.values():
            keys.update(option)
    return keys


@dataclass(slots=True)
class Check:
    """How one product measures up to one item of the request."""

    details: ProductDetails
    title_score: float
    recall: float = 0.0
    met: list[str] = field(default_factory=list)
    misses: list[str] = field(default_factory=list)
    option: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when every requirement holds."""
        return not self.misses

    def rank(self) -> tuple[int, float, float, float]:
        """Sort key, best first: fewest misses, then the most of the item's words in the
        title, then the closest title, then the cheapest."""
        return (len(self.misses), -self.recall, -self.title_score, self.details.price)


def _values(d: ProductDetails, option: dict[str, str]) -> dict[str, set[str]]:
    pool: dict[str, set[str]] = {k: {v.casefold() for v in vs} for k, vs in d.attributes.items()}
    for k, v in option.items():
        pool.setdefault(k, set()).add(v.casefold())
    return pool


def _meets(text: str, key: str, wanted: str, have: set[str]) -> bool:
    if wanted in have:
        return True
    # A value with a comma or an "and" in it is cut short when read; try the product's own.
    return any(v.startswith(wanted) and states_value(text, key, v) for v in have)


def check(
    item: ItemNeed,
    d: ProductDetails,
    pairs: dict[str, str],
    *,
    wanted_title: Wanted | None = None,
    must_mention: str | None = None,
    title_min: float = TITLE_OK,
) -> Check:
    """Check `d` against the item: title (at least `title_min`), price, services, requested
    values (`pairs`), and (knowledge requests) a name the title or description must carry."""
    wanted = wanted_title or item.phrase
    c = Check(details=d, title_score=title_score(wanted, d.title),
              recall=title_recall(wanted, d.title))  # fmt: skip
    if c.recall >= title_min:
        c.met.append(f"the title carries {c.recall:.0%} of the words asked for")
    else:
        c.misses.append(f"the title carries only {c.recall:.0%} of the words asked for")
    if item.price is not None:
        if item.price.admits(d.price):
            c.met.append(f"{money(d.price)} is {price_words(item.price)}")
        else:
            c.misses.append(f"{money(d.price)} is not {price_words(item.price)}")
    for s in item.services:
        if s in d.service:
            c.met.append(f"it has {SERVICE_NAMES.get(s, s)}")
        else:
            c.misses.append(f"no {SERVICE_NAMES.get(s, s)}")
    if pairs:
        options = [{}, *d.sku_options.values()]
        best: tuple[int, dict[str, str]] = (-1, {})
        for option in options:
            pool = _values(d, option)
            n = sum(_meets(item.text, k, v, pool.get(k, set())) for k, v in pairs.items())
            if n > best[0]:
                best = (n, option)
        c.option = best[1]
        pool = _values(d, c.option)
        for k, v in pairs.items():
            label = k.replace("_", " ")
            have = pool.get(k, set())
            if _meets(item.text, k, v, have):
                c.met.append(f'{label} "{v}"')
            else:
                shown = ", ".join(sorted(have)) or "not listed"
                c.misses.append(f'{label} is {shown}, not "{v}"')
    if must_mention:
        name = must_mention.casefold()
        if name in d.title.casefold() or name in d.description.casefold():
            c.met.append(f"it mentions {must_mention}")
        else:
            c.misses.append(f"it never mentions {must_mention}")
    return c


def check_all(
    item: ItemNeed,
    viewed: list[ProductDetails],
    *,
    wanted_title: Wanted | None = None,
    must_mention: str | None = None,
    title_min: float = TITLE_OK,
) -> list[Check]:
    """Check every viewed product against the item, best first (see :meth:`Check.rank`)."""
    pairs = requested_pairs(item.text, keys_of(viewed))
    checks = [
        check(item, d, pairs, wanted_title=wanted_title, must_mention=must_mention,
              title_min=title_min)
        for d in viewed
    ]
    checks.sort(key=Check.rank)
    return checks
