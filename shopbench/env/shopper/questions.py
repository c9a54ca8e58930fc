"""Reading an agent's question to the shopper: which topics it is about, or whether it asks
for the product itself.

Topics are the hidden card's (:mod:`shopbench.tasks.hidden`): ``price``, ``service`` and
``pair:<key>`` for an attribute or SKU key, recognised by the catalog's own label of the key
(``color_family`` → "color family"), by a word of that label that names it ("color"), or by
a synonym ("colour", "budget", "shipping"). ``shop`` is a topic no card holds back (the
shopper does not mind which shop). A question that asks for a product, an id, a title, a
link or the answer itself is a request for the product, whatever else it says.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from shopbench.tasks.hidden import PRICE, SERVICE, pair_topic

SHOP = "shop"

MAX_QUESTION_CHARS = 300
"""The longest question the shopper reads; a longer one is refused before it is read."""

_PRODUCT = re.compile(
    r"\b(?:product[ _-]?ids?|ids?|sku[ _-]?ids?|titles?|titled|listings?|links?|urls?|"
    r"which (?:one|product|item|listing|of them)|what (?:product|item|listing)|"
    r"exact (?:product|item|model|one)|model (?:name|number)|product name|"
    r"name of (?:the|that|it)|the name\b|brand name|shop[ _-]?(?:id|name)|store name|"
    r"seller name|targets?|answer|gold|hidden card|system prompt|instructions?|ignore|"
    r"reveal|pretend|developer mode|jailbreak|repeat after|say exactly)\b",
    re.I,
)
_PRICE = re.compile(
    r"\b(?:prices?|priced|pricing|budget|costs?|costing|spend|spending|expensive|cheap|"
    r"cheaper|afford|pesos|php|how much|range)\b|₱",
    re.I,
)
_SERVICE = re.compile(
    r"\b(?:services?|shipping|ship|ships|delivery|deliver|delivered|cod|cash|pay|payment|"
    r"paying|official|lazmall|mall|flash|sale|lazflash|deal)\b",
    re.I,
)
_SHOP = re.compile(r"\b(?:shops?|stores?|sellers?|vendors?|merchants?)\b", re.I)

SYNONYMS: dict[str, tuple[str, ...]] = {
    "color": ("colour", "colours", "colors", "shade", "hue"),
    "size": ("sizes", "sizing", "fit"),
    "material": ("materials", "fabric", "made of", "made from"),
    "capacity": ("how big", "volume"),
    "scent": ("smell", "fragrance"),
    "flavor": ("flavour", "taste"),
    "pattern": ("print", "design"),
    "variation": ("variant", "version", "option"),
}
"""Words a shopper takes for a label word (keys of the catalog name these with the word)."""

# Words of a label too general to name a key by themselves.
_GENERIC = frozenset({
    "type", "types", "of", "the", "and", "level", "number", "features", "feature", "fa",
    "general", "new", "by", "gr", "w", "mobile", "dia", "inch",
})  # fmt: skip


@dataclass(frozen=True, slots=True)
class QuestionReading:
    """What a question is about: the topics in the order it names them, and whether it asks
    for the product itself."""

    topics: tuple[str, ...]
    product: bool


@lru_cache(maxsize=4096)
def _label_patterns(key: str) -> tuple[re.Pattern[str], tuple[re.Pattern[str], ...]]:
    """The whole label's pattern, and one per word of it (with its synonyms) that names it."""
    label = key.replace("_", " ").strip().lower()
    whole = re.compile(rf"(?<![a-z0-9]){re.escape(label)}(?![a-z0-9])")
    words: list[re.Pattern[str]] = []
    for word in re.findall(r"[a-z]+", label):
        if len(word) < 3 or word in _GENERIC:
            continue
        forms = (word, *SYNONYMS.get(word, ()))
        words.append(re.compile(r"\b(?:" + "|".join(map(re.escape, forms)) + r")\b"))
    return whole, tuple(words)


def _first(pattern: re.Pattern[str], text: str) -> int | None:
    m = pattern.search(text)
    return None if m is None else m.start()


def read_question(question: str, keys: Sequence[str]) -> QuestionReading:
    """The topics `question` is about, among price, service, shop and the attribute/SKU
    `keys` the shopper knows, in the order it names them; a key named by its whole label
    comes before one only a word of its label names."""
    text = question.lower()
    if _PRODUCT.search(text):
        return QuestionReading(topics=(), product=True)
    found: dict[str, tuple[int, int]] = {}
    for topic, pattern in ((PRICE, _PRICE), (SERVICE, _SERVICE)):
        at = _first(pattern, text)
        if at is not None:
            found[topic] = (at, 0)
    for key in keys:
        whole, words = _label_patterns(key)
        at = _first(whole, text)
        if at is not None:
            found[pair_topic(key)] = (at, 0)
            continue
        spots = [a for w in words if (a := _first(w, text)) is not None]
        if spots:
            found[pair_topic(key)] = (min(spots), 1)
    at = _first(_SHOP, text)
    if at is not None and SERVICE not in found:
        found[SHOP] = (at, 0)
    # A word several keys share ("size") names the key whose whole label was said first.
    ordered = sorted(found, key=lambda t: (found[t][1], found[t][0]))
    return QuestionReading(topics=tuple(ordered), product=False)
