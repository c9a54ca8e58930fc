"""Query grounding: could the agent have known the words it searched for?

An agent knows the customer's request and whatever the tools have shown it so far in this
episode — nothing else (the catalog is secret and ids are episode-scoped). So the words of
each ``find_product`` query must come from the user's query or from earlier observations. A
run of ``run_length`` (default three) or more consecutive content words that appear in
neither marks knowledge the agent could not have had: a narrator's scripted search or an
agent that solved the task offline.

The judge also knows what the agent was looking for without being told: the grader's
targets (the titles the outcome was graded against, a knowledge task's hidden answer). A
content word of those *secrets* that the query contains before any observation showed it
— a seller's bracketed note, the answer a knowledge task leaves out — is a leak: the agent
knew the answer before it searched. Words of the user's request are never secret.

The price filter is part of the search too: a window narrow enough to name one price (at
most 2 pesos or ``price_window`` of its upper bound wide) whose bounds are no number the
agent knew is a price it could only have read in the catalog itself.

Words are compared after the same light normalisation on both sides: lower case, accents
folded, split on anything that is not a letter or digit, a plural ``s``/``es`` ignored.
Stop words are transparent (they neither break nor extend a run), and a short list of
generic shopping words (from the rubric file) counts as known.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

WORD = re.compile(r"[^\W_]+")
"""A word: a run of letters and digits."""

_LUCENE_STOP_WORDS = (
    "a an and are as at be but by for if in into is it no not of on or such that the their"
    " then there these they this to was will with"
)
STOP_WORDS: frozenset[str] = frozenset(
    # Lucene's English stop words, as the search index drops them, plus a few more that
    # carry no product knowledge.
    _LUCENE_STOP_WORDS.split()
    + ["i", "me", "my", "we", "our", "you", "your", "want", "need", "looking", "find", "some",
       "any", "from"]
)


def fold(text: str) -> str:
    """`text` lower-cased with accents folded to ASCII where they have an ASCII base; the
    peso sign becomes the word ``php`` (it marks money, and has no ASCII base)."""
    low = text.lower()
    if low.isascii():
        return low
    low = low.replace("₱", " php ")
    return unicodedata.normalize("NFKD", low).encode("ascii", "ignore").decode("ascii")


def words(text: str) -> list[str]:
    """The words of `text`, folded, in order (stop words included)."""
    return WORD.findall(fold(text))


@lru_cache(maxsize=65536)
def content_words(text: str) -> tuple[str, ...]:
    """The words of `text` that are not stop words, in order (cached: a search's words are
    read by several checks, and the same requests and titles recur across a round)."""
    return tuple(w for w in words(text) if w not in STOP_WORDS)


def variants(word: str) -> tuple[str, ...]:
    """The forms a word is looked up under: itself and its singular/plural neighbours."""
    if len(word) > 3 and word.endswith("es"):
        return (word, word[:-1], word[:-2])
    if len(word) > 2 and word.endswith("s") and not word.endswith("ss"):
        return (word, word[:-1])
    return (word, word + "s", word + "es")


def knows(vocabulary: Container[str], word: str) -> bool:
    """Whether `word` (or a singular/plural form of it) is in `vocabulary`."""
    return word in vocabulary or any(v in vocabulary for v in variants(word)[1:])


class Grounding(BaseModel):
    """How one search relates to what the agent knew when it sent it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    query: str = Field(description="the query text (cut to 200 characters)")
    content_words: int = Field(description="words of the query that are not stop words")
    unknown_words: list[str] = Field(description="content words found in neither source")
    longest_run: int = Field(description="longest run of consecutive unknown content words")
    leaked_words: list[str] = Field(description="unknown words of the hidden answer")
    price_filter: str | None = Field(default=None, description="the price argument, if any")
    reasons: list[str] = Field(description="why the search is ungrounded; empty when it is not")

    @property
    def grounded(self) -> bool:
        """True when nothing in the search shows knowledge the agent could not have had."""
        return not self.reasons

    def reason(self) -> str:
        """The first reason the search is ungrounded ('' when it is grounded)."""
        return self.reasons[0] if self.reasons else ""


@dataclass(frozen=True, slots=True)
class GroundingRules:
    """The thresholds of :func:`ground_search` (from the rubric file)."""

    run_length: int = 3
    common: frozenset[str] = frozenset()
    leak_limit: int = 1
    price_window: float = 0.02


_BOUND = re.compile(r"^\s*(\d+(?:\.\d+)?)?\s*-\s*(\d+(?:\.\d+)?)?\s*$")


def narrow_price_window(price: str, width: float = 0.02) -> tuple[float, float] | None:
    """The bounds of a price filter ``lo-hi`` (lo above 0) when it is narrow enough to name
    one price (at most 2 pesos or `width` of hi wide), else None."""
    m = _BOUND.match(price)
    if not m or m.group(1) is None or m.group(2) is None:
        return None
    lo, hi = float(m.group(1)), float(m.group(2))
    # "0-1" is a search for the cheapest things, not a price: a named price has lo > 0.
    if lo <= 0 or hi < lo or hi - lo > max(2.0, width * hi):
        return None
    return lo, hi


def ground_search(
    arguments: Mapping[str, Any],
    known: Iterable[Container[str]],
    is_known_number: Callable[[float], bool],
    rules: GroundingRules = GroundingRules(),
    *,
    secret: frozenset[str] = frozenset(),
) -> Grounding:
    """Check a ``find_product`` call's arguments against what the agent could know.

    `known` holds the word sets the agent could draw on (the user's query, the words of
    earlier observations); ``rules.common`` are generic words known everywhere. The search
    is ungrounded when its ``q`` has a run of ``rules.run_length`` or more consecutive
    unknown content words (stop words are skipped, they do not interrupt a run), when ``q``
    has ``rules.leak_limit`` or more unknown words of the hidden answer `secret`, or when
    its ``price`` filter is a window narrow enough to name one price and neither bound is
    a number the agent knew (`is_known_number`, within a peso).
    """
    query = str(arguments.get("q", ""))
    sources = list(known)
    content = list(content_words(query))
    unknown: list[str] = []
    runs: list[str] = []
    run: list[str] = []
    longest = 0
    for w in content + [""]:  # the empty sentinel closes the last run
        if w and not (w in rules.common or any(knows(src, w) for src in sources)):
            unknown.append(w)
            run.append(w)
            longest = max(longest, len(run))
            continue
        if len(run) >= rules.run_length:
            runs.append(" ".join(run))
        run = []
    leaked = [w for w in unknown if any(v in secret for v in variants(w))]
    reasons = [f"words from neither the request nor earlier results: {r!r}" for r in runs]
    if rules.leak_limit and len(leaked) >= rules.leak_limit:
        reasons.append(f"words of the hidden answer not yet shown: {' '.join(leaked)!r}")
    price = arguments.get("price")
    price_text = str(price) if price is not None else None
    window = narrow_price_window(price_text, rules.price_window) if price_text else None
    if window is not None and not any(
        is_known_number(x) for b in window for x in (b, b - 1, b + 1)
    ):
        reasons.append(f"a price window naming a price never shown: {price_text!r}")
    return Grounding(
        query=query[:200],
        content_words=len(content),
        unknown_words=unknown,
        longest_run=longest,
        leaked_words=leaked,
        price_filter=price_text[:40] if price_text else None,
        reasons=reasons,
    )
