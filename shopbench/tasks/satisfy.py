"""Satisfying sets: the products that pass a slot's grader, found through the search index.

Scanning a million products per task is out of reach at generation speed, and a product no
search can reach cannot be recommended either. So a slot's satisfying set is defined as the
products that pass the real grader among the top ``window`` (default 100) search results for
the slot's product phrase (the words the query names the item with, :func:`search_phrase`)
under the slot's own filters (price bound, services) — the same search whose top 50 proves
the target findable. The slot's target always belongs to its own set.

Exact screens run before the grader, cheapest first: a bound on the hits' title words
(:class:`TitleScreen`), then the caller's screen on ids (the split, the stored SKU and
attribute values), then the title match itself; only the survivors are loaded and graded.
How complete the set is depends on the catalog: where many listings share a title's words,
more of them pass than any window holds (``docs/tasks.md`` gives measured figures).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache

from shopbench.catalog.schema import Product
from shopbench.catalog.search.index import SearchIndex, TitledHit
from shopbench.outcome.grader import DEFAULT_MATCHER, grade, grade_slot
from shopbench.outcome.spec import Slot
from shopbench.outcome.title import (
    MARKETPLACE_NOISE,
    NOISE_PHRASES,
    LexicalTitleMatcher,
    TitleMatcher,
    title_tokens,
)
from shopbench.tasks.model import Task
from shopbench.tasks.phrase_search import SATISFY_WINDOW, phrase_search
from shopbench.tasks.queries import product_phrase

Allow = Callable[[Product], bool]
"""Decides whether a passing product may be listed (e.g. only live groups for live tasks)."""

CandidateScreen = Callable[[Sequence[str], Sequence[tuple[str, str]]], list[bool]]
"""Given candidate ids and a slot's (key, value) pairs, False for each candidate that
certainly cannot be listed (so it need not be loaded); True when unsure."""


_RAW_TOKEN = re.compile(r"[^\W_]+")


# Words that may vanish from a title's tokens (sales noise, pack units, words of noise
# phrases). A word outside this set, made of letters only, always stays a token.
_MAY_VANISH = frozenset(
    MARKETPLACE_NOISE
    | {w for p in NOISE_PHRASES for w in p.split()}
    | {"pcs", "pc", "piece", "pieces", "pack", "packs", "pk", "set", "sets", "pair", "pairs"}
)


@lru_cache(maxsize=1 << 18)
def cached_title_tokens(title: str) -> frozenset[str]:
    """``title_tokens``, memoised: a candidate's title is compared with many targets."""
    return title_tokens(title)


class CachedLexicalMatcher(LexicalTitleMatcher):
    """The default lexical matcher with memoised tokens: the same verdicts, much faster when
    the same titles are compared again and again, as satisfying-set searches do."""

    def similarity(self, candidate: str, target: str) -> float:
        """Dice coefficient of the two titles' content-word sets (as the parent computes)."""
        a, b = cached_title_tokens(candidate), cached_title_tokens(target)
        if not a or not b:
            return super().similarity(candidate, target)
        return 2 * len(a & b) / (len(a) + len(b))


def _kept_count(words: frozenset[str]) -> int:
    """A lower bound on the token count of a title with these raw words (at most as many)."""
    return len(
        {w[:-1] if w[-1] == "s" else w for w in words if w.isalpha() and w not in _MAY_VANISH}
    )


class TitleScreen:
    """Screens candidate titles against a slot's target titles before the real grader runs.

    :meth:`may_match` is a necessary condition for a lexical title match, much cheaper than
    the match. Dice(A, B) >= t means 2|A ∩ B| >= t(|A| + |B|). For an ASCII title, case
    folding is lower-casing and accent stripping does nothing, so each real token is a raw
    lower-cased word or that word without a trailing "s": counting the raw words that are in
    B, plus those that are a word of B with an "s" added, bounds |A ∩ B| from above.
    Letters-only words that no noise rule can drop always stay tokens, and counting them with
    any trailing "s" stripped (which merges at least as much as the real plural rule) bounds
    |A| from below; the raw word count bounds it from above. A candidate failing the
    inequality with these bounds cannot match (the lower bound on |A| is counted only when
    the cheaper ends, 0 and the raw word count, do not decide). Non-ASCII titles are
    tokenized for real.

    :meth:`matches` is the matcher's verdict, with the target titles tokenized once rather
    than once per candidate (the lexical matcher's Dice coefficient of token sets).

    Other matchers get neither shortcut: every title passes the screen, and the grader
    decides.
    """

    def __init__(self, matcher: TitleMatcher, targets: list[str], *, knowledge: bool) -> None:
        self._active = type(matcher) in (LexicalTitleMatcher, CachedLexicalMatcher)
        self._threshold = matcher.knowledge_threshold if knowledge else matcher.threshold
        self._targets = [cached_title_tokens(x) for x in targets]
        # A raw word is a target's token x in one of two forms: x itself, or x + "s".
        self._plurals = [frozenset(x + "s" for x in b) for b in self._targets]

    def may_match(self, title: str) -> bool:
        """False only when `title` certainly matches none of the target titles."""
        if not self._active:
            return True
        t = self._threshold
        if not title.isascii():
            a = title_tokens(title)
            return any(2 * len(a & b) >= t * (len(a) + len(b)) - 1e-9 for b in self._targets)
        words = frozenset(_RAW_TOKEN.findall(title.lower()))
        n_kept: int | None = None
        for b, plurals in zip(self._targets, self._plurals, strict=True):
            # An upper bound on |A ∩ B|: a word and its "s"-less form may both count.
            twice_shared = 2 * (len(words & b) + len(words & plurals))
            if twice_shared < t * len(b) - 1e-9:
                continue
            if twice_shared >= t * (len(words) + len(b)) - 1e-9:
                return True
            if n_kept is None:
                n_kept = _kept_count(words)
            if twice_shared >= t * (n_kept + len(b)) - 1e-9:
                return True
        return False

    def matches(self, title: str) -> bool:
        """Whether `title` matches a target title (True for matchers without a shortcut)."""
        if not self._active:
            return True
        a = cached_title_tokens(title)
        for b in self._targets:
            if not a or not b:
                return True  # titles without words: the grader compares the raw text
            if 2 * len(a & b) / (len(a) + len(b)) >= self._threshold:
                return True
        return False


def slot_pairs(slot: Slot) -> list[tuple[str, str]]:
    """The (key, value) pairs a slot asks for: SKU options first, then attributes."""
    pairs = [(k, v) for option in slot.sku_options or [] for k, v in option.items()]
    pairs += [(k, v) for a in slot.attributes or [] for k, vs in a.items() for v in vs]
    return pairs


def may_have_pairs(product: Product, pairs: list[tuple[str, str]]) -> bool:
    """A necessary condition for the slot's pairs: each is among the product's attributes or
    in one of its SKU options (the grader then needs them all in one option)."""
    for k, v in pairs:
        if v in product.attributes.get(k, ()):
            continue
        if not any(option.get(k) == v for option in product.sku_options.values()):
            return False
    return True


def slot_passes(task: Task, i: int, product: Product, matcher: TitleMatcher | None = None) -> bool:
    """Whether `product` fully satisfies slot `i` of `task` under its grader (rule score 1;
    for intents graded on an answer, the key attribute and the stricter title match)."""
    m = matcher or DEFAULT_MATCHER
    if task.rules.answer:
        return grade(task, [product], m).success
    return grade_slot(task.reward[i], product, m, index=i).rule_score >= 1.0


def _memoised(matcher: TitleMatcher) -> TitleMatcher:
    """The same matcher with memoised tokens, when it is the plain lexical one."""
    if type(matcher) is LexicalTitleMatcher:
        return CachedLexicalMatcher(matcher.threshold, matcher.knowledge_threshold)
    return matcher


def search_phrase(task: Task, i: int) -> str:
    """The words a shopper searches slot `i`'s item with: the task's own phrase for it (what
    the query names the item with), or, for a task without phrases (e.g. imported from
    ShoppingBench), its target title's product phrase.

    For a knowledge task the query leaves the answer out, but a shopper who found it searches
    with it, so the phrase keeps it.
    """
    if task.phrases is None:
        return product_phrase(task.reward[i].title[0])
    phrase = task.phrases[i]
    answer = task.knowledge_attribute
    if not task.rules.answer or not answer:
        return phrase
    return with_answer(phrase, answer, str(task.meta.get("knowledge_kind", "")))


def with_answer(phrase: str, answer: str, kind: str) -> str:
    """A knowledge item's words with the answer a shopper looked up: a brand goes before
    them, a material after them, as titles have them."""
    return f"{answer} {phrase}" if kind == "brand" else f"{phrase} {answer}"


def slot_search(index: SearchIndex, task: Task, i: int, window: int) -> list[TitledHit]:
    """The top `window` hits for slot `i`'s phrase under the slot's own filters."""
    return phrase_search(index, task.reward[i], search_phrase(task, i), window)


def satisfying_set(
    index: SearchIndex,
    task: Task,
    i: int,
    *,
    matcher: TitleMatcher | None = None,
    window: int = SATISFY_WINDOW,
    allow: Allow | None = None,
    hits: list[TitledHit] | None = None,
    screen_ids: CandidateScreen | None = None,
) -> list[str]:
    """The catalog ids that satisfy slot `i` of `task`, in search rank order, target first.

    See the module docstring for what "every" means; `hits` may pass the result of
    :func:`slot_search` with this `window` when the caller already has it. `allow` drops
    products a task may not list (they still satisfy the slot, but e.g. belong to the
    held-out split); `screen_ids` may rule candidates out before they are loaded.
    """
    m = _memoised(matcher or DEFAULT_MATCHER)
    slot = task.reward[i]
    knowledge = task.rules.answer
    if hits is None:
        hits = slot_search(index, task, i, window)
    screen = TitleScreen(m, slot.title, knowledge=knowledge)
    # Cheapest checks first: the title bound, then the caller's screen, then the exact title.
    maybe = [h for h in hits if screen.may_match(h.title)]
    wanted = [] if knowledge else slot_pairs(slot)
    if screen_ids is not None and maybe:
        verdicts = screen_ids([h.product_id for h in maybe], wanted)
        maybe = [h for h, ok in zip(maybe, verdicts, strict=True) if ok]
    titled = [h.product_id for h in maybe if screen.matches(h.title)]
    ids = [
        p.product_id
        for p in index.get(titled)
        if p is not None
        and may_have_pairs(p, wanted)
        and slot_passes(task, i, p, m)
        and (allow is None or allow(p))
    ]
    target = slot.product_id
    if target is not None and target not in ids:
        found = index.get([target])[0]
        if found is not None and (allow is None or allow(found)):
            ids.insert(0, target)
    elif target is not None:
        ids.remove(target)
        ids.insert(0, target)
    return ids
