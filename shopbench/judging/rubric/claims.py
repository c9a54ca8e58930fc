"""Reading an agent's words: what one turn's text cites, claims and names.

The text of a turn is read against what the agent had been shown *before* the turn:

- ids: every 10-digit (product) or 9-digit (shop) number either was shown earlier in this
  episode (grounded) or is provably fabricated (ids are episode tokens);
- prices: a number equal to a shown price is a price citation; a number marked as money
  (₱, PHP, pesos, "price") that is neither a shown price, a number of the request, nor
  arithmetic on those (sums of the prices of products the turn names, differences,
  percentage discounts) is an unverified price claim;
- attributes: an attribute or SKU value of a viewed product that the text repeats, unless
  the request itself says it;
- products: the shown products the text names, by id or by a run of ``title_ngram`` title
  words (see :meth:`TextReader._titles`);
- judge-directed text: phrases addressed to a grader (patterns from the rubric file),
  unless the request or an observation contains the same words.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from itertools import combinations

from shopbench.judging.rubric.facts import EvidenceRules, TurnFacts
from shopbench.judging.rubric.grounding import WORD, fold, words
from shopbench.judging.rubric.knowledge import Knowledge, near

ID = re.compile(r"(?<![\d.,])\d{9,10}(?![\d])")
"""A product (10 digits) or shop (9 digits) token."""
NUMBER = re.compile(r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\d])(?!,\d)")
"""A number as people write it: ``1299``, ``1,299``, ``1299.50``."""
_PERCENT = re.compile(r"(\d+(?:\.\d+)?)\s*%")
_MONEY_BEFORE = re.compile(r"(?:\$|\bphp|\bp|\bprice[sd]?(?: at| of| is)?|\bcosts?)\W{0,2}$")
_MONEY_AFTER = re.compile(r"^\s?(?:pesos?|php)\b")
_MAX_SUBSET_PRODUCTS = 6  # subset sums of at most this many named products' prices
_MIN_PRICE_CITATION = 10.0  # smaller numbers are counts, sizes, pages: not price citations


class TextReader:
    """Reads one turn's text against what the agent knew before the turn."""

    def __init__(self, query: str, rules: EvidenceRules) -> None:
        self.rules = rules
        self.query_folded = fold(query)
        self.query_words = set(words(query))
        self.query_numbers = [
            float(whole.replace(",", "") + frac) for whole, frac in NUMBER.findall(fold(query))
        ]
        self._query_sorted = sorted(self.query_numbers)
        self._value_in_query: dict[str, bool] = {}
        self.percents = [float(p) for p in _PERCENT.findall(query)]
        n = rules.title_ngram
        qw = words(query)
        self.query_grams = {tuple(qw[i : i + n]) for i in range(len(qw) - n + 1)}

    def knows_number(self, know: Knowledge) -> Callable[[float], bool]:
        """Whether a number is one of the request's or a price shown so far."""
        tol = self.rules.price_tolerance
        return lambda x: know.is_price(x) or near(self._query_sorted, x, tol)

    def read(self, turn: TurnFacts, know: Knowledge) -> list[str]:
        """Record what the turn's text cites, claims and names; return its words."""
        text = turn.text
        if not text.strip():
            return []
        folded = fold(text)
        tw = WORD.findall(folded)
        for m in ID.finditer(text):
            token = m.group(0)
            if token in know.products or token in know.shops:
                turn.ids_grounded.add(token)
                if token in know.products:
                    turn.mentioned.add(token)
            else:
                turn.ids_fabricated.add(token)
        self._titles(turn, folded, tw, know)
        self._prices(turn, folded, know)
        if know.values:
            present = set(tw)
            joined = ""
            for first in present & know.values.keys():
                for v in know.values[first]:
                    if not joined:
                        joined = " " + " ".join(tw) + " "
                    if f" {v} " in joined and not self._requested(v):
                        turn.attributes_cited += 1
        for needles, pattern in self.rules.judge_patterns:
            if not any(x in folded for x in needles):
                continue  # the pattern cannot match without one of its needles: skip the scan
            for m in pattern.finditer(folded):
                said = m.group(0)
                # The customer's own words, or a product's, are not addressed to a grader.
                if said not in self.query_folded and not any(said in o for o in know.texts):
                    turn.judge_directed.append(said[:80])
        return tw

    def _requested(self, value: str) -> bool:
        """Whether every word of an attribute value is in the request (cached per value)."""
        known = self._value_in_query.get(value)
        if known is None:
            known = self._value_in_query[value] = all(
                w in self.query_words for w in value.split()
            )
        return known

    def _titles(self, turn: TurnFacts, folded: str, tw: list[str], know: Knowledge) -> None:
        """The shown products the text names by title.

        Each maximal run of title grams narrows the candidates to the products whose titles
        contain the whole run. A run several products share is settled by a price quoted
        right after it, else recorded as naming one of them. A run the request itself
        contains names a product only together with that product's price: repeating the
        request proves nothing.
        """
        n = self.rules.title_ngram
        grams = list(zip(*(tw[i:] for i in range(n)), strict=False))
        ends: list[int] = []  # character offset after each word, computed when first needed
        i = 0
        while i < len(grams):
            owners = know.grams.get(grams[i])
            if not owners:
                i += 1
                continue
            candidates = set(owners)
            j = i + 1
            while j < len(grams) and (more := know.grams.get(grams[j])):
                if not candidates & more:
                    break
                candidates &= more
                j += 1
            parroted = all(g in self.query_grams for g in grams[i:j])
            if len(candidates) > 1 or parroted:
                if not ends:
                    ends = [m.end() for m in WORD.finditer(folded)]
                after = folded[ends[j + n - 2] : ends[j + n - 2] + 40]
                quoted = [float(a.replace(",", "") + b) for a, b in NUMBER.findall(after)]
                priced = {
                    t for t in candidates
                    if (p := know.products[t].price) is not None
                    and any(near([p], q, self.rules.price_tolerance) for q in quoted)
                }
                if len(priced) == 1:
                    candidates = priced
                elif parroted:
                    i = j
                    continue
            if len(candidates) == 1:
                turn.mentioned.update(candidates)
            else:
                turn.ambiguous.append(frozenset(candidates))
            i = j

    def _prices(self, turn: TurnFacts, folded: str, know: Knowledge) -> None:
        claims: list[float] = []
        for m in NUMBER.finditer(folded):
            whole, frac = m.group(1), m.group(2) or ""
            if not frac and "," not in whole and len(whole) >= 9:
                continue  # an id, read above
            value = float(whole.replace(",", "") + frac)
            if near(self._query_sorted, value, 0.0):
                continue  # the request's own number: neither a citation nor a claim
            if value >= _MIN_PRICE_CITATION and know.is_price(value):
                turn.prices_cited += 1
                continue
            before = folded[max(0, m.start() - 12) : m.start()]
            after = folded[m.end() : m.end() + 8]
            if _MONEY_BEFORE.search(before) or _MONEY_AFTER.search(after):
                claims.append(value)
        if claims:
            turn.prices_unverified = self._unexplained(claims, turn, know)

    def _unexplained(self, claims: list[float], turn: TurnFacts, know: Knowledge) -> list[float]:
        """The money claims that no request number or arithmetic on named prices explains."""
        named = [
            p for t in sorted(turn.mentioned)
            if (p := know.products[t].price) is not None
        ][:_MAX_SUBSET_PRODUCTS]
        base = set(self.query_numbers)
        for k in range(2, len(named) + 1):
            base.update(sum(c) for c in combinations(named, k))
        base.update(named)
        values = list(base)
        derived = set(values)
        derived.update(a - b for a in values for b in values)
        for p in self.percents:
            derived.update(v * (1 - p / 100) for v in values)
            derived.update(v * p / 100 for v in values)
        ordered = sorted(derived)
        tol = self.rules.price_tolerance
        return [c for c in claims if not near(ordered, c, tol)]
