"""Evidence for the rubric: what the agent did (tool log) and what its words prove it read.

Facts come only from the environment. A tool message counts as an observation only when its
sha256 equals the ``result_digest`` of a tool-log entry (matched in log order), so a forged
or edited tool message, or a call that never ran, shows the agent nothing. The call's name
and arguments are taken from that log entry, never from the agent's message.

The agent's words (reasoning and content of each assistant turn) are claims. Read in
episode order, each turn's text is checked against what the agent had been shown *before*
that turn — its own turn's results come after it wrote:

- ids: every 10-digit (product) or 9-digit (shop) number in the text either was shown
  earlier in this episode (grounded) or is provably fabricated (ids are episode tokens);
- prices: a number equal to a shown price is a price citation; a number marked as money
  (₱, PHP, pesos, "price") that is neither a shown price, a number of the request, nor
  arithmetic on those (sums of the prices of products the turn names, differences,
  percentage discounts) is an unverified price claim;
- attributes: an attribute or SKU value of a viewed product that the text repeats, unless
  the request itself says it;
- mentions: the shown products the text names, by id or by a run of ``title_ngram`` title
  words unique to one product (runs the request itself contains do not count);
- judge-directed text: phrases addressed to a grader (patterns from the rubric file), unless
  an observation contains the same words.

Each call is checked against its turn's text (does the reasoning name what the call is
about) and each search against what the agent could know (:mod:`grounding`).
"""

from __future__ import annotations

import bisect
import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import combinations
from typing import Any

from shopbench.grading.grounding import (
    STOP_WORDS,
    WORD,
    Grounding,
    GroundingRules,
    fold,
    ground_search,
    knows,
    words,
)
from shopbench.grading.record import MAX_TEXT_CHARS, JudgedRecord, read_record, turn_text
from shopbench.trajectory import ToolLogEntry, Trajectory

_ID = re.compile(r"(?<![\d.,])\d{9,10}(?![\d])")
_NUMBER = re.compile(r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\d])(?!,\d)")
_PERCENT = re.compile(r"(\d+(?:\.\d+)?)\s*%")
_MONEY_BEFORE = re.compile(r"(?:₱|\$|\bphp|\bp|\bprice[sd]?(?: at| of| is)?|\bcosts?)\W{0,2}$")
_MONEY_AFTER = re.compile(r"^\s?(?:pesos?|php)\b")
_FILTERS = ("price", "service", "sort", "shop_id")
_MAX_SUBSET_PRODUCTS = 6  # subset sums of at most this many named products' prices
_MIN_PRICE_CITATION = 10.0  # smaller numbers are counts, sizes, pages: not price citations


@dataclass(frozen=True, slots=True)
class EvidenceRules:
    """The knobs of evidence extraction (from the rubric file)."""

    grounding: GroundingRules = GroundingRules()
    title_ngram: int = 4
    price_tolerance: float = 0.01
    filter_claims: frozenset[str] = frozenset()
    judge_patterns: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...] = ()
    """(needles, pattern): the pattern runs only on text containing one of its needles."""


@dataclass(slots=True)
class Shown:
    """A product the environment showed in this episode."""

    title: str
    price: float | None
    viewed_turn: int | None = None  # the turn whose call showed its details first
    values: tuple[str, ...] = ()  # folded attribute and SKU values, from its details


@dataclass(slots=True)
class CallFacts:
    """One tool call of a turn: what ran, what it showed, how it relates to the words."""

    turn: int
    name: str
    arguments: dict[str, Any]
    executed: bool
    error: str | None = None
    shown: list[str] = field(default_factory=list)  # product tokens it showed
    empty: bool = False  # a search that ran and showed nothing
    on_target: bool = False  # a search whose best hit covers half of its own words
    grounding: Grounding | None = None  # find_product only
    matches_text: bool | None = None  # the turn's text names what the call is about


@dataclass(slots=True)
class TurnFacts:
    """One assistant turn: its text, its calls, and what the text proves or claims."""

    index: int
    text: str
    calls: list[CallFacts] = field(default_factory=list)
    ids_grounded: set[str] = field(default_factory=set)
    ids_fabricated: set[str] = field(default_factory=set)
    prices_cited: int = 0
    prices_unverified: list[float] = field(default_factory=list)
    attributes_cited: int = 0
    mentioned: set[str] = field(default_factory=set)  # shown product tokens the text names
    # Title runs the text names that several shown products share: one of them is meant.
    ambiguous: list[frozenset[str]] = field(default_factory=list)
    judge_directed: list[str] = field(default_factory=list)

    @property
    def has_text(self) -> bool:
        """Whether the turn has any words of its own."""
        return bool(self.text.strip())


@dataclass(slots=True)
class Evidence:
    """Everything the rubric decides on, for one trajectory."""

    query: str
    task_id: str
    agent: str
    miner: str
    turns: list[TurnFacts]
    shown: dict[str, Shown]
    recommended: list[str]  # tokens of the accepted recommendation
    recommend_turn: int | None  # the turn of the first recommend_product attempt
    notes: list[str]

    def calls(self, name: str | None = None) -> list[CallFacts]:
        """The executed calls, of tool `name` or all, in episode order."""
        return [
            c
            for t in self.turns
            for c in t.calls
            if c.executed and (name is None or c.name == name)
        ]


class _Knowledge:
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

    def add_text(self, content: str) -> None:
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
        self._prices.append(price)
        self._sorted = False

    def is_price(self, value: float) -> bool:
        """Whether `value` is within the tolerance of a price shown so far."""
        if not self._sorted:
            self._prices.sort()
            self._sorted = True
        return _near(self._prices, value, self.rules.price_tolerance)

    def add_product(self, token: str, title: str, price: float | None, shop: str) -> Shown:
        known = self.products.get(token)
        if shop:
            self.shops.add(shop)
        if known is not None:
            return known
        shown = self.products[token] = Shown(title=title, price=price)
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
def _title_words(title: str) -> tuple[str, ...]:
    # Cached: the same titles come back in every episode of a round.
    return tuple(words(title))


@lru_cache(maxsize=65536)
def _title_grams(title: str, n: int) -> tuple[tuple[str, ...], ...]:
    tw = _title_words(title)
    return tuple(zip(*(tw[i:] for i in range(n)), strict=False))


def _near(ordered: list[float], value: float, tolerance: float) -> bool:
    i = bisect.bisect_left(ordered, value * (1 - tolerance) - 1e-9)
    return i < len(ordered) and ordered[i] <= value * (1 + tolerance) + 1e-9


def _float(x: Any) -> float | None:
    if isinstance(x, bool):
        return None
    if isinstance(x, int | float):
        return float(x)
    try:
        return float(str(x))
    except ValueError:
        return None


def _json_list(text: str) -> list[dict[str, Any]]:
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return []
    return [d for d in data if isinstance(d, dict)] if isinstance(data, list) else []


def _split_ids(value: Any) -> list[str]:
    return [t.strip() for t in str(value or "").split(",") if t.strip()]


def _args(entry_args: dict[str, Any] | str) -> dict[str, Any]:
    if isinstance(entry_args, dict):
        return entry_args
    try:
        parsed = json.loads(entry_args)
    except (json.JSONDecodeError, RecursionError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _observe(call: CallFacts, content: str, know: _Knowledge, turn: int) -> None:
    """Add one trusted observation to what the agent knows, and record what it showed."""
    know.add_text(content)
    if call.error is not None:
        return
    if call.name == "find_product":
        for h in _json_list(content):
            token = str(h.get("product_id", ""))
            if not token:
                continue
            know.add_product(token, str(h.get("title", "")), _float(h.get("price")),
                             str(h.get("shop_id", "")))
            call.shown.append(token)
        call.empty = not call.shown
    elif call.name == "view_product_information":
        for d in _json_list(content):
            token = str(d.get("product_id", ""))
            if not token:
                continue
            shown = know.add_product(token, str(d.get("title", "")), _float(d.get("price")),
                                     str(d.get("shop_id", "")))
            if shown.viewed_turn is None:
                shown.viewed_turn = turn
                shown.values = _values(d)
                for v in shown.values:
                    know.values.setdefault(v.split(" ", 1)[0], set()).add(v)
            call.shown.append(token)


def _values(details: dict[str, Any]) -> tuple[str, ...]:
    """The folded attribute and SKU option values of a product's details."""
    out: set[str] = set()
    attrs = details.get("attributes")
    if isinstance(attrs, dict):
        for vs in attrs.values():
            for v in vs if isinstance(vs, list) else [vs]:
                out.add(" ".join(words(str(v))))
    skus = details.get("sku_options")
    if isinstance(skus, dict):
        for option in skus.values():
            if isinstance(option, dict):
                out.update(" ".join(words(str(v))) for v in option.values())
    return tuple(v for v in out if len(v) >= 3)


def _on_target(q: str, hits: list[str], know: _Knowledge) -> bool:
    """Whether the best hit's title covers at least half of the search's content words."""
    wanted = {w for w in words(q) if w not in STOP_WORDS}
    if not wanted or not hits:
        return False
    need = (len(wanted) + 1) // 2
    for token in hits:
        title_words = set(_title_words(know.products[token].title))
        if sum(knows(title_words, w) for w in wanted) >= need:
            return True
    return False


class _TextReader:
    """Reads one turn's text against what the agent knew before the turn."""

    def __init__(self, query: str, rules: EvidenceRules) -> None:
        self.rules = rules
        self.query_folded = fold(query)
        self.query_words = set(words(query))
        self.query_numbers = [
            float(whole.replace(",", "") + frac) for whole, frac in _NUMBER.findall(fold(query))
        ]
        self.percents = [float(p) for p in _PERCENT.findall(query)]
        n = rules.title_ngram
        qw = words(query)
        self.query_grams = {tuple(qw[i : i + n]) for i in range(len(qw) - n + 1)}

    def knows_number(self, know: _Knowledge) -> Callable[[float], bool]:
        """Whether a number is one of the request's or a price shown so far."""
        tol = self.rules.price_tolerance
        query = sorted(self.query_numbers)
        return lambda x: know.is_price(x) or _near(query, x, tol)

    def read(self, turn: TurnFacts, know: _Knowledge) -> list[str]:
        """Record what the turn's text cites, claims and names; return its words."""
        text = turn.text
        if not text.strip():
            return []
        folded = fold(text)
        spans = [(m.group(0), m.end()) for m in WORD.finditer(folded)]
        tw = [w for w, _ in spans]
        for m in _ID.finditer(text):
            token = m.group(0)
            if token in know.products or token in know.shops:
                turn.ids_grounded.add(token)
                if token in know.products:
                    turn.mentioned.add(token)
            else:
                turn.ids_fabricated.add(token)
        self._titles(turn, folded, spans, know)
        self._prices(turn, folded, know)
        if know.values:
            present = set(tw)
            joined = ""
            for first in present & know.values.keys():
                for v in know.values[first]:
                    if not joined:
                        joined = " " + " ".join(tw) + " "
                    if f" {v} " in joined and not all(w in self.query_words for w in v.split()):
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

    def _titles(
        self, turn: TurnFacts, folded: str, spans: list[tuple[str, int]], know: _Knowledge
    ) -> None:
        """The shown products the text names by title.

        Each maximal run of title grams narrows the candidates to the products whose titles
        contain the whole run. A run several products share is settled by a price quoted
        right after it, else recorded as naming one of them. A run the request itself
        contains names a product only together with that product's price: repeating the
        request proves nothing.
        """
        n = self.rules.title_ngram
        tw = [w for w, _ in spans]
        grams = list(zip(*(tw[i:] for i in range(n)), strict=False))
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
                after = folded[spans[j + n - 2][1] : spans[j + n - 2][1] + 40]
                quoted = [float(a.replace(",", "") + b) for a, b in _NUMBER.findall(after)]
                priced = {
                    t for t in candidates
                    if (p := know.products[t].price) is not None
                    and any(_near([p], q, self.rules.price_tolerance) for q in quoted)
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

    def _prices(self, turn: TurnFacts, folded: str, know: _Knowledge) -> None:
        claims: list[float] = []
        for m in _NUMBER.finditer(folded):
            whole, frac = m.group(1), m.group(2) or ""
            if not frac and "," not in whole and len(whole) >= 9:
                continue  # an id, read above
            value = float(whole.replace(",", "") + frac)
            if value >= _MIN_PRICE_CITATION and know.is_price(value):
                turn.prices_cited += 1
                continue
            before = folded[max(0, m.start() - 12) : m.start()]
            after = folded[m.end() : m.end() + 8]
            if _MONEY_BEFORE.search(before) or _MONEY_AFTER.search(after):
                claims.append(value)
        if claims:
            turn.prices_unverified = self._unexplained(claims, turn, know)

    def _unexplained(self, claims: list[float], turn: TurnFacts, know: _Knowledge) -> list[float]:
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
        return [c for c in claims if not _near(ordered, c, tol)]


def _match_call(
    call: CallFacts, turn: TurnFacts, text_words: set[str], claims: frozenset[str]
) -> bool | None:
    """Whether the turn's text drives `call`; None when the text neither names nor
    contradicts what the call is about.

    A turn without words drives nothing. A search matches when the text names its words
    (two of them, or all if fewer), and mismatches when the text claims filtering (a word
    of `claims`) while no call of the turn filters. A recommendation matches only when the
    text names a product it recommends. A view matches when the text names a product it
    opens, and mismatches when the text names only other products.
    """
    if not turn.has_text:
        return False if call.name != "terminate" else None
    if call.name in ("find_product", "web_search"):
        wanted = {w for w in words(str(call.arguments.get("q", ""))) if w not in STOP_WORDS}
        if wanted and sum(knows(text_words, w) for w in wanted) >= min(2, len(wanted)):
            return True
        if claims & text_words and not any(
            c.arguments.get(k) for c in turn.calls for k in _FILTERS
        ):
            return False
        return None
    if call.name in ("view_product_information", "recommend_product"):
        ids = _split_ids(call.arguments.get("product_ids"))
        if not ids:
            return None
        named = turn.mentioned | turn.ids_fabricated
        named = named.union(*turn.ambiguous)
        if any(t in named for t in ids):
            return True
        if call.name == "view_product_information" and not named:
            return None  # "opening the closest four" names nothing and contradicts nothing
        return False
    return None


def _bind(record: JudgedRecord) -> tuple[dict[int, ToolLogEntry], int]:
    """Tool messages (by message index) that match a tool-log entry's digest, in log order;
    and how many log entries no message matched."""
    by_digest: dict[str, list[int]] = {}
    for i, entry in enumerate(record.tool_log):
        by_digest.setdefault(entry.result_digest, []).append(i)
    bound: dict[int, ToolLogEntry] = {}
    last = -1
    for mi, m in enumerate(record.messages):
        if m.role != "tool":
            continue
        digest = hashlib.sha256((m.content or "").encode("utf-8")).hexdigest()
        queue = by_digest.get(digest)
        if not queue:
            continue
        # The earliest unused entry after the last bound one: log order is message order.
        j = bisect.bisect_right(queue, last)
        if j < len(queue):
            last = queue.pop(j)
            bound[mi] = record.tool_log[last]
    return bound, len(record.tool_log) - len(bound)


def extract(
    trajectory: Trajectory | Mapping[str, Any], rules: EvidenceRules | None = None
) -> Evidence:
    """The evidence in one trajectory; never raises for a record of any shape."""
    rules = rules or EvidenceRules()
    record = read_record(trajectory)
    notes = list(record.notes)
    bound, unmatched_log = _bind(record)
    answers: dict[str, int] = {}
    for mi, m in enumerate(record.messages):
        if m.role == "tool" and m.tool_call_id and m.tool_call_id not in answers:
            answers[m.tool_call_id] = mi

    know = _Knowledge(rules)
    reader = _TextReader(record.query, rules)
    sources = (reader.query_words, know)
    secret = frozenset(
        w for text in record.secrets for w in words(text)
        if w not in STOP_WORDS and w not in rules.grounding.common
        and not knows(reader.query_words, w)
    )
    turns: list[TurnFacts] = []
    recommended: list[str] = []
    recommend_turn: int | None = None
    cut_turns: list[int] = []
    not_run = 0
    for m in record.messages:
        if m.role != "assistant":
            continue
        index = len(turns)
        text, cut = turn_text(m)
        if cut:
            cut_turns.append(index)
        turn = TurnFacts(index=index, text=text)
        text_words = set(reader.read(turn, know))
        observed: list[tuple[CallFacts, str]] = []
        for tc in m.tool_calls or []:
            mi = answers.get(tc.id)
            entry = bound.get(mi) if mi is not None else None
            if entry is None:
                not_run += 1
                turn.calls.append(
                    CallFacts(turn=index, name=tc.function.name, arguments={}, executed=False)
                )
                continue
            call = CallFacts(
                turn=index, name=entry.name, arguments=_args(entry.arguments), executed=True,
                error=entry.error,
            )
            if call.name == "find_product":
                call.grounding = ground_search(
                    call.arguments, sources, reader.knows_number(know), rules.grounding,
                    secret=secret,
                )
            if call.name == "recommend_product" and recommend_turn is None:
                recommend_turn = index
            turn.calls.append(call)
            observed.append((call, record.messages[mi].content or ""))  # type: ignore[index]
        for call in turn.calls:
            call.matches_text = (
                _match_call(call, turn, text_words, rules.filter_claims) if call.executed else None
            )
        # The turn's results arrive after its text and calls: only now does the agent know them.
        for call, content in observed:
            _observe(call, content, know, index)
            if call.name == "find_product" and call.error is None:
                call.on_target = _on_target(str(call.arguments.get("q", "")), call.shown, know)
            if call.name == "recommend_product" and call.error is None and not recommended:
                recommended = _split_ids(call.arguments.get("product_ids"))
        turns.append(turn)

    if not turns:
        notes.append("no assistant messages")
    if cut_turns:
        notes.append(
            f"reasoning or content of turn(s) {', '.join(str(i + 1) for i in cut_turns[:5])} "
            f"cut to {MAX_TEXT_CHARS} characters for judging"
        )
    if not_run:
        notes.append(f"{not_run} tool call(s) never executed (no tool-log entry with their result)")
    tool_messages = sum(1 for m in record.messages if m.role == "tool")
    if tool_messages > len(bound):
        notes.append(
            f"{tool_messages - len(bound)} tool message(s) match no tool-log entry and were ignored"
        )
    if unmatched_log:
        notes.append(f"{unmatched_log} tool-log entr(y/ies) have no matching tool message")
    return Evidence(
        query=record.query,
        task_id=record.task_id,
        agent=record.agent,
        miner=record.miner,
        turns=turns,
        shown=know.products,
        recommended=recommended,
        recommend_turn=recommend_turn,
        notes=notes,
    )
