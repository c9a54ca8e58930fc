"""How text becomes search terms: one analyzer, for the products and for the queries.

The analyzer mirrors what ShoppingBench's Lucene index does with English text: split on
anything that is not a letter or digit, lowercase, fold accents to ASCII, drop Lucene's
English stop words, and stem (Snowball English). Because queries are turned into terms here,
with this same analyzer, and never handed to the engine's query parser, no query text can
be a syntax error: ``AND (``, ``price:[``, quotes, ``-`` and unicode are just characters.

Products' text is analysed here too (:func:`index_terms`; the engine only splits it on
spaces), every token kept, so that term frequencies and document lengths are Lucene's: a
word written three times has frequency 3, and BM25's saturation (not a rule of ours) keeps
"Wireless Mic Wireless Wireless" from outranking a product that matches every query word.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import tantivy

INDEX_TOKENIZER = "whitespace"
"""The engine's tokenizer for text already analysed by :func:`index_terms` (built in)."""

MAX_QUERY_CHARS = 1000
"""Only this much of a query is analysed; a longer query is truncated, not rejected."""

MAX_QUERY_TERMS = 32
"""At most this many distinct terms are searched (the first ones, in query order)."""

_local = threading.local()


def build_analyzer() -> tantivy.TextAnalyzer:
    """A fresh instance of the shopbench text analyzer."""
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        # Tokens this long are noise (hashes, URLs glued together) and bloat the dictionary.
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.ascii_fold())
        .filter(tantivy.Filter.stopword("english"))
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


def _analyzer() -> tantivy.TextAnalyzer:
    # One analyzer per thread: the native object is not meant to be shared across threads.
    a = getattr(_local, "analyzer", None)
    if a is None:
        a = _local.analyzer = build_analyzer()
    return a


def index_terms(text: str) -> str:
    """Every term of a product text, in order and with repeats, joined by spaces, for indexing."""
    return " ".join(_analyzer().analyze(text))


def query_terms(q: str) -> list[str]:
    """The distinct index terms of a query, in query order; empty when nothing searchable.

    Never raises on any string: operators and punctuation are separators, stop words vanish,
    and only the first :data:`MAX_QUERY_CHARS` characters and :data:`MAX_QUERY_TERMS`
    distinct terms count.
    """
    tokens = _analyzer().analyze(q[:MAX_QUERY_CHARS])
    return list(dict.fromkeys(tokens))[:MAX_QUERY_TERMS]


def title_relevance(terms: Sequence[str], title: str) -> tuple[int, int, int]:
    """How much a title is about a query's `terms` (from :func:`query_terms`), for ordering
    equal BM25 scores: (how many of the terms the title holds, how many of the query's
    adjacent term pairs stand next to each other, in that order, in the title, minus the
    title's length in terms: of two titles saying as much of the query, the shorter says
    less of anything else). Larger is more relevant."""
    words = _analyzer().analyze(title)
    present = set(words)
    held = sum(t in present for t in terms)
    if held < 2:
        return held, 0, -len(words)
    pairs = set(zip(words, words[1:], strict=False))
    return held, sum(p in pairs for p in zip(terms, terms[1:], strict=False)), -len(words)
