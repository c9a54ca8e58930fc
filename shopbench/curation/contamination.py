"""Contamination: does a trajectory's query overlap a test set's?

A test set is any task file ``read_tasks`` reads (ShoppingBench's test files as ``tasks
import`` reads them, or a task file of ours such as the held-out split).

**Normalisation** (:func:`normalise`, the one function both sides go through): Unicode
format characters (category Cf: zero-width space and joiners, the BOM, the soft hyphen, bidi
marks) are deleted; NFKC folds compatibility forms (fullwidth letters and digits, ligatures,
mathematical letters, non-breaking spaces); the look-alike letters of :data:`CONFUSABLES`
(Cyrillic and Greek homoglyphs of Latin letters, dotless i) become their Latin letter; the
text is case folded and its accents and other combining marks removed; apostrophes are
deleted (``women's`` = ``womens``) and every other punctuation mark or symbol separates
words; letters and digits are split apart (``12inch`` = ``12-inch`` = ``12 inch``). Numbers
take one form: a thousands separator (``1,000``, ``1 000``) is dropped, a decimal's trailing
zeros are (``1000.00`` = ``1000``, ``1.50`` = ``1.5``), and so are leading zeros; currency
signs separate words and the currency words of :data:`CURRENCY_WORDS` are dropped, so
``₱1,000`` = ``PHP 1000`` = ``1000.00 pesos``.

**Comparison**: a query is its *set* of normalised words, so word order, clause order and
repeated words do not count. Each word weighs its inverse document frequency in the test set,
``log((N + 1) / (df + 1)) + 1`` over the set's N queries: the words every shopping query of
the set shares (``looking``, ``for``, ``with``, a voucher's boilerplate) weigh about 1, a
word found in one query about ``1 + log(N / 2)``, a word in no test query the most. A
query's overlap with one test query is the share of its own weight that the test query also
has (weighted containment); at or above ``threshold`` it is contaminated, so a few changed
words cost only their weight. The other way round, a query holding at least
``cover_threshold`` of one test query's weight is contaminated too: a test query padded
with words of its own dilutes the first share, not this one. The lookup is an inverted
index from word to test queries with prefix filtering: the query's words are taken rarest
first until the words left weigh less than the threshold's share, only the test queries
holding one of those are candidates (a test query holding none of them cannot reach the
threshold), and each candidate is scored exactly; for the cover, each test query's own
rarest words are indexed the same way at build time. ``shopbench bench contamination``
measures the catch rate per kind of edit and the false positives on arena queries
(``docs/curation.md``).
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
import unicodedata
from pathlib import Path
from typing import NamedTuple

from pydantic import Field

from shopbench.curation.errors import CurationError
from shopbench.curation.registry import RuleParams
from shopbench.errors import ShopbenchError
from shopbench.tasks.io import read_tasks

# Look-alikes of Latin letters that NFKC leaves alone, mapped before case folding (so that
# Greek capital eta is H and small eta n). Cyrillic first, then Greek, then others.
CONFUSABLES: dict[str, str] = {
    # Cyrillic capitals
    "А": "A", "В": "B", "С": "C", "Е": "E", "Н": "H", "І": "I", "Ј": "J", "К": "K",
    "М": "M", "О": "O", "Р": "P", "Ѕ": "S", "Т": "T", "Х": "X", "У": "Y", "Ү": "Y",
    "Ԛ": "Q", "Ԝ": "W", "Ї": "I", "Ғ": "F", "Һ": "H", "Ь": "b", "З": "3",
    # Cyrillic small letters
    "а": "a", "в": "b", "с": "c", "е": "e", "ё": "e", "һ": "h", "і": "i", "ї": "i",
    "ј": "j", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p", "ԛ": "q", "ѕ": "s",
    "т": "t", "у": "y", "ү": "y", "ԝ": "w", "х": "x", "ԁ": "d", "ɡ": "g", "ь": "b",
    "п": "n", "г": "r", "ӏ": "l",
    # Greek capitals
    "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M",
    "Ν": "N", "Ο": "O", "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X", "Ϲ": "C", "Ϳ": "J",
    # Greek small letters
    "α": "a", "β": "b", "γ": "y", "ε": "e", "η": "n", "ι": "i", "κ": "k", "ν": "v",
    "ο": "o", "ρ": "p", "τ": "t", "υ": "u", "χ": "x", "ϲ": "c", "ϳ": "j", "ω": "w",
    # Others: dotless i, Latin small capitals and Armenian look-alikes
    "ı": "i", "ȷ": "j", "ʀ": "r", "ɪ": "i", "ᴀ": "a", "ᴄ": "c", "ᴇ": "e", "ᴏ": "o",
    "օ": "o", "ս": "u", "ց": "g", "հ": "h", "ո": "n",
}  # fmt: skip
"""Look-alike letters and the Latin letter each stands for (NFKC already folds fullwidth,
mathematical and other compatibility forms)."""

CURRENCY_WORDS: frozenset[str] = frozenset(
    {"php", "peso", "pesos", "usd", "dollar", "dollars", "eur", "euro", "euros"}
)
"""Words naming a currency, dropped like the currency signs (``₱ 50`` = ``50 pesos``)."""

_TO_LATIN = str.maketrans(CONFUSABLES)
_APOSTROPHES = re.compile("['\u2018\u2019\u02bc\u02b9\u2032]")
# A thousands separator: a comma or space between digit groups of three.
_GROUPED = re.compile(r"(?<![\d.,])\d{1,3}(?:[, ]\d{3})+(?![\d]|,\d)")
_TOKEN = re.compile(r"\d+(?:\.\d+)?|[^\W\d_]+")


def _plain(text: str) -> str:
    """NFKC, format characters deleted, look-alikes mapped, case folded, marks removed."""
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf")
    text = unicodedata.normalize("NFKC", text).translate(_TO_LATIN).casefold()
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if unicodedata.category(ch) not in ("Mn", "Me"))


def _number(token: str) -> str:
    whole, _, fraction = token.partition(".")
    whole = whole.lstrip("0") or "0"
    fraction = fraction.rstrip("0")
    return f"{whole}.{fraction}" if fraction else whole


def words(text: str) -> list[str]:
    """The normalised words of `text`, in order (see the module docstring)."""
    # ASCII text has no format characters, look-alikes or marks: only the case to fold.
    text = text.lower() if text.isascii() else _plain(text)
    text = _APOSTROPHES.sub("", text)
    text = _GROUPED.sub(lambda m: m.group(0).replace(",", "").replace(" ", ""), text)
    out: list[str] = []
    for token in _TOKEN.findall(text):
        if token[0].isdigit():
            out.append(_number(token))
        elif token not in CURRENCY_WORDS:
            out.append(token)
    return out


@functools.lru_cache(maxsize=256)
def _word_set(text: str) -> frozenset[str]:
    # Cached: curation looks each query up in every test set in turn.
    return frozenset(words(text))


def normalise(text: str) -> str:
    """`text` in the one form contamination compares: its normalised words, one space
    apart (see the module docstring for each step)."""
    return " ".join(words(text))


class ContaminationParams(RuleParams):
    """Queries that overlap a test set are dropped (and counted either way)."""

    test_sets: list[str] = Field(
        default_factory=list,
        description="task files (ours or ShoppingBench's) whose queries must not be trained on",
    )
    threshold: float = Field(
        default=0.6, gt=0, le=1,
        description="share of a query's word weight (IDF over the test set, words normalised) "
        "found in one test query that contaminates it",
    )  # fmt: skip
    cover_threshold: float = Field(
        default=0.9, gt=0, le=1,
        description="share of one test query's word weight found in a query that contaminates "
        "it (a test query padded with words of its own)",
    )  # fmt: skip


class Match(NamedTuple):
    """A query's overlap with one test query of a set."""

    position: int
    """The test query's place in its set (0 = the first task of the file)."""
    contained: float
    """The share of the query's word weight that the test query also has."""
    covered: float
    """The share of the test query's word weight that the query also has."""

    def reason(self) -> str:
        """Why the query is contaminated: both shares, the test query counted from 1."""
        return (
            f"{self.contained:.2f} of its weighted words are in test query "
            f"{self.position + 1}, {self.covered:.2f} of that query's in it"
        )


class TestSet:
    """The weighted word index of one test set's queries, and the thresholds it matches at."""

    __test__ = False  # not a pytest class

    def __init__(
        self, name: str, queries: list[str], params: ContaminationParams | None = None,
        sha256: str | None = None,
    ) -> None:  # fmt: skip
        params = params if params is not None else ContaminationParams()
        self.name = name
        self.sha256 = sha256  # of the file's bytes, when loaded from one
        self.size = len(queries)
        self.queries = list(queries)
        self.threshold = params.threshold
        self.cover_threshold = params.cover_threshold
        self._sets: list[frozenset[str]] = [frozenset(words(q)) for q in queries]
        self._index: dict[str, list[int]] = {}
        for i, ws in enumerate(self._sets):
            for w in sorted(ws):
                self._index.setdefault(w, []).append(i)
        self._unseen = math.log(self.size + 1) + 1.0
        self._weight = {
            w: math.log((self.size + 1) / (len(ids) + 1)) + 1.0 for w, ids in self._index.items()
        }
        # Each test query's total weight, and the index of its rarest words: a query holding
        # none of them holds less than cover_threshold of the test query's weight.
        self._totals = [sum(self._weight[w] for w in ws) for ws in self._sets]
        self._rarest: dict[str, list[int]] = {}
        for i, ws in enumerate(self._sets):
            rest = self._totals[i]
            for wt, w in sorted(((self._weight[w], w) for w in ws), reverse=True):
                if rest < self.cover_threshold * self._totals[i]:
                    break
                self._rarest.setdefault(w, []).append(i)
                rest -= wt

    @classmethod
    def load(cls, path: str | Path, params: ContaminationParams | None = None) -> TestSet:
        """The queries of the task file at `path`; CurationError when it cannot be read or
        holds no task."""
        try:
            loaded = read_tasks(path)
        except ShopbenchError as e:
            raise CurationError(f"contamination test set: {e}") from None
        if not loaded.tasks:
            raise CurationError(f"contamination test set {path}: no tasks in it")
        try:
            digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        except OSError as e:
            raise CurationError(f"contamination test set {path}: {e.strerror or e}") from None
        return cls(str(path), [t.query for t in loaded.tasks], params, sha256=digest)

    def weight(self, word: str) -> float:
        """The weight of the normalised `word` in this set (its smoothed IDF)."""
        return self._weight.get(word, self._unseen)

    def contained(self, query: str, threshold: float = 0.0) -> tuple[float, int | None]:
        """The largest share of `query`'s word weight that one test query also has, and that
        test query's position (None when no test query shares a scored word).

        Only test queries that can reach `threshold` are scored (0 scores them all); the
        share is exact whenever it is at least `threshold`, and below it otherwise.
        """
        weighted = sorted(((self.weight(w), w) for w in _word_set(query)), reverse=True)
        total = sum(wt for wt, _ in weighted)
        if total == 0:
            return 0.0, None
        # Prefix filter: a test query sharing none of the rarest words up to the point
        # where the rest weigh less than threshold × total cannot reach the threshold.
        candidates: set[int] = set()
        rest = total
        for wt, w in weighted:
            if rest < threshold * total:
                break
            candidates.update(self._index.get(w, ()))
            rest -= wt
        best, where = 0.0, None
        for i in sorted(candidates):
            ws = self._sets[i]
            shared = sum(wt for wt, w in weighted if w in ws)
            if shared > best:
                best, where = shared, i
        return best / total, where

    def covered(self, query: str) -> tuple[float, int | None]:
        """The largest share of one test query's word weight that `query` also has, among
        the test queries that can reach the cover threshold (exact when at least it), and
        that test query's position."""
        ws = _word_set(query)
        candidates = {i for w in ws for i in self._rarest.get(w, ())}
        best, where = 0.0, None
        for i in sorted(candidates):
            share = self._share_of_test(ws, i)
            if share > best:
                best, where = share, i
        return best, where

    def match(self, query: str) -> Match | None:
        """The test query `query` overlaps at or above a threshold (its own words in the test
        query, or the test query's words in it), or None when it is clean."""
        contained, at = self.contained(query, self.threshold)
        if at is None or contained < self.threshold:
            covered, at = self.covered(query)
            if at is None or covered < self.cover_threshold:
                return None
        ws = _word_set(query)
        total = sum(self.weight(w) for w in ws)
        shared = sum(self.weight(w) for w in ws if w in self._sets[at])
        return Match(at, shared / total, self._share_of_test(ws, at))

    def _share_of_test(self, ws: frozenset[str], i: int) -> float:
        if not self._totals[i]:
            return 0.0
        return sum(self._weight[w] for w in self._sets[i] if w in ws) / self._totals[i]
