"""How a shopper names a product: a few of its title's words, not the whole title.

ShoppingBench's queries rarely repeat a listing's title ("B20 cast bronze crash cymbals",
"a 12 inch heavy-duty rubber wheel for a pushcart"): they name the kind of product and a
few of the words that set it apart, often without the brand. The grader still holds a
recommendation's title to the *target's* title, so an agent has to find, among the listings
that fit the description, the ones that are the same product — by reading and comparing,
not by pasting the query into the search box.

:func:`shopper_phrase` draws such a description from a title with a task's own random
generator: the product's noun (the words its leaf calls it, or the title's last word when
the leaf is unknown) always, the brand with probability ``brand``, each other content word
with probability ``modifier`` (at least ``min_modifiers``, at most ``max_modifiers``), in
the title's order, except that a run led by "for" goes last ("mouse for laptop"); runs of
the leaf's own words ("heavy duty") are kept or left whole, pack counts never, and no word
is said twice. Title-case words are lower-cased as a shopper types them; words with
digits or in capitals (``4k``, ``LED``) and the brand keep their case.
:func:`findable_phrase` says more when the words do not find the product (the generator
keeps only tasks whose targets are findable from the query's words).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field

from shopbench.tasks.queries import product_phrase


class PhraseOdds(BaseModel):
    """How much of a title a description keeps."""

    model_config = ConfigDict(frozen=True)

    brand: float = Field(default=0.3, ge=0, le=1, description="keep the brand's words")
    modifier: float = Field(default=0.5, ge=0, le=1, description="keep each other word")
    min_modifiers: int = Field(default=1, ge=0, description="words kept besides the noun")
    max_modifiers: int = Field(default=3, ge=0)


PRODUCT_PHRASE_ODDS = PhraseOdds()
WIDER = PhraseOdds(brand=1.0, modifier=0.8, min_modifiers=2, max_modifiers=5)
"""The second try when a description does not find its product: brand and most words."""
LITERAL = PhraseOdds(brand=1.0, modifier=1.0, min_modifiers=0, max_modifiers=1 << 10)
"""Keeps every word: the product phrase itself."""

_STRIP = ",.;:!?-/|\"'()"


def _fold(word: str) -> str:
    w = word.casefold().strip(_STRIP)
    return w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w


@dataclass(frozen=True)
class LeafWords:
    """What the catalog generator titles a leaf's products with, as folded word runs."""

    nouns: tuple[tuple[str, ...], ...] = ()
    """What titles call the product, longest first."""
    units: tuple[tuple[str, ...], ...] = ()
    """Runs that go together (``heavy duty``, ``large capacity``), longest first."""
    packs: frozenset[tuple[str, ...]] = frozenset()
    """Pack counts (``set of 3``): never a describing word."""


def _runs(texts: Iterable[str]) -> tuple[tuple[str, ...], ...]:
    runs = {tuple(_fold(w) for w in t.split()) for t in texts}
    return tuple(sorted((r for r in runs if r), key=lambda r: (-len(r), r)))


@lru_cache(maxsize=512)
def leaf_words(leaf: str) -> LeafWords:
    """The packaged taxonomy's words for `leaf`; empty for a leaf it does not know (an
    imported catalog), whose titles are then read word by word."""
    from shopbench.catalog.taxonomy import load_taxonomy

    tax = load_taxonomy()
    for spec in tax.leaves:
        if spec.name.casefold() == leaf.casefold():
            values = [v for a in spec.attrs for v in tax.vocab.get(a, ())]
            return LeafWords(
                nouns=_runs(spec.nouns),
                units=_runs([*spec.words, *values, *spec.features]),
                packs=frozenset(_runs(tax.words.pack_words)),
            )
    return LeafWords()


def _find_run(words: list[str], run: tuple[str, ...]) -> int | None:
    """Where `run` last starts among the folded `words`, or None."""
    n = len(run)
    for start in range(len(words) - n, -1, -1):
        if tuple(words[start : start + n]) == run:
            return start
    return None


def _noun_span(folded: list[str], lw: LeafWords) -> range:
    """The indices of the product's noun: a leaf noun found in the title, else the last
    word made of letters (else the last word)."""
    for run in lw.nouns:
        at = _find_run(folded, run)
        if at is not None:
            return range(at, at + len(run))
    for i in range(len(folded) - 1, -1, -1):
        if folded[i].isalpha():
            return range(i, i + 1)
    return range(len(folded) - 1, len(folded))


def _brand_span(folded: list[str], brand: str) -> range:
    run = tuple(_fold(w) for w in brand.split())
    at = _find_run(folded, run) if run else None
    return range(0) if at is None else range(at, at + len(run))


def _units(folded: list[str], taken: set[int], lw: LeafWords) -> list[range]:
    """The describing units of the title outside `taken`: known runs matched longest first,
    other words one by one; pack counts, bare numbers, joining words and units whose words
    were all said already left out."""
    out: list[range] = []
    seen = {folded[j] for j in taken}  # a word said once is not said again ("gaming gaming")
    i = 0
    while i < len(folded):
        if i in taken:
            i += 1
            continue
        span = range(i, i + 1)
        for run in (*sorted(lw.packs, key=len, reverse=True), *lw.units):
            n = len(run)
            if n > 1 and tuple(folded[i : i + n]) == run and not taken & set(range(i, i + n)):
                span = range(i, i + n)
                break
        words = tuple(folded[j] for j in span)
        describing = words not in lw.packs and any(
            w.isalpha() and w not in _JOINERS for w in words
        ) and not _PACK.match(words[0]) and not set(words) <= seen
        if describing:
            out.append(span)
            seen.update(words)
        i = span.stop
    return out


def _shopper_case(word: str, keep: bool) -> str:
    if keep or any(c.isdigit() for c in word) or (word.isupper() and len(word) > 1):
        return word
    return word.lower()


def shopper_phrase(
    title: str,
    rng: random.Random,
    *,
    brand: str = "",
    leaf: str = "",
    drop: str = "",
    odds: PhraseOdds = PRODUCT_PHRASE_ODDS,
) -> str:
    """A shopper's description of the product titled `title` (see the module docstring).

    `drop` (a knowledge task's answer) never appears, as in :func:`product_phrase`, whose
    output this starts from; with :data:`LITERAL` odds the result is that phrase.
    """
    full = product_phrase(title, drop=drop)
    words = full.split()
    if odds == LITERAL or len(words) <= 2:
        return full
    lw = leaf_words(leaf)
    folded = [_fold(w) for w in words]
    noun = _noun_span(folded, lw)
    brand_at = _brand_span(folded, brand) if brand else range(0)
    brand_at = range(0) if set(brand_at) & set(noun) else brand_at
    units = _units(folded, {*noun, *brand_at}, lw)
    kept_brand = bool(brand_at) and rng.random() < odds.brand
    picked = [u for u in units if rng.random() < odds.modifier]
    if len(picked) < odds.min_modifiers:
        rest = [u for u in units if u not in picked]
        picked += rng.sample(rest, min(len(rest), odds.min_modifiers - len(picked)))
    if len(picked) > odds.max_modifiers:
        picked = rng.sample(picked, odds.max_modifiers)
    # A unit led by "for" or "with" reads as a clause: it goes after the rest ("mouse for
    # laptop", not "for laptop mouse").
    trailing = [u for u in picked if folded[u[0]] in _JOINERS]
    keep = {*noun, *(i for u in picked for i in u), *(brand_at if kept_brand else ())}
    keep -= {i for u in trailing for i in u}
    order = sorted(keep) + [i for u in sorted(trailing, key=lambda u: u[0]) for i in u]
    # "Co." would end a sentence in the middle of a query.
    out = [_shopper_case(words[i], i in brand_at).rstrip(".") for i in order]
    return " ".join(out).strip(_STRIP + " ") or full


def findable_phrase(
    title: str,
    rng: random.Random,
    finds: Callable[[str], bool],
    *,
    brand: str = "",
    leaf: str = "",
    drop: str = "",
    odds: PhraseOdds = PRODUCT_PHRASE_ODDS,
) -> str:
    """A description that finds its product: drawn with `odds`, else with :data:`WIDER`
    odds, else the whole product phrase — the first for which ``finds(phrase)`` holds (the
    last when none does). On a large catalog a few words may fit thousands of listings; a
    shopper who saw that would say more."""
    tried: list[str] = []
    for o in (odds, WIDER, LITERAL):
        phrase = shopper_phrase(title, rng, brand=brand, leaf=leaf, drop=drop, odds=o)
        if phrase in tried:
            continue
        if finds(phrase):
            return phrase
        tried.append(phrase)
    return tried[-1]


_JOINERS = frozenset({"and", "with", "for", "of", "the", "a", "an", "to", "in", "on", "&", "+"})
_PACK = re.compile(r"^(?:x?\d+(?:pcs|pc|pieces|pack|packs|x)?|pcs|pc|pack|pieces)$")
