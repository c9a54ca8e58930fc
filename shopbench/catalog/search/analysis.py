"""How text becomes search terms: one analyzer, for the products and for the queries.

The analyzer mirrors what ShoppingBench's Lucene index does with English text: split on
anything that is not a letter or digit, lowercase, fold accents to ASCII, drop Lucene's
English stop words, and stem (Snowball English). Because queries are turned into terms here,
with this same analyzer, and never handed to the engine's query parser, no query text can
be a syntax error: ``AND (``, ``price:[``, quotes, ``-`` and unicode are just characters.

Products' text is analysed here too, and each distinct term is indexed once per field
(:func:`index_terms`; the engine only splits it on spaces). Marketplace titles repeat words
to rank higher ("Wireless Mic Wireless Wireless"); counting a term once per field keeps
"wireless earbuds" about earbuds instead of about whoever wrote "wireless" three times.
"""

from __future__ import annotations

import threading

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
    """The distinct terms of a product text, in order, joined by spaces, for indexing."""
    return " ".join(dict.fromkeys(_analyzer().analyze(text)))


def query_terms(q: str) -> list[str]:
    """The distinct index terms of a query, in query order; empty when nothing searchable.

    Never raises on any string: operators and punctuation are separators, stop words vanish,
    and only the first :data:`MAX_QUERY_CHARS` characters and :data:`MAX_QUERY_TERMS`
    distinct terms count.
    """
    tokens = _analyzer().analyze(q[:MAX_QUERY_CHARS])
    return list(dict.fromkeys(tokens))[:MAX_QUERY_TERMS]
