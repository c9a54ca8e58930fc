"""The index's schema and how one product row becomes one index document.

Searchable text is one BM25 field, ``contents``, built as ShoppingBench builds its Lucene
document: the title, then the distinct SKU option values, then the distinct attribute
values, as one text (:func:`contents_text`). Every analysed token counts, as Lucene counts
them, so a word in the title and in an attribute has term frequency 2 in that one field and
saturates like any repeated word, instead of scoring twice. The brand field is left out, as
ShoppingBench leaves it out: the generator always repeats it as the ``brand`` attribute, and
a marketplace title nearly always names it.

Length normalisation. tantivy's BM25 has b = 0.75 built in; Pyserini's default is b = 0.4.
Every document's contents end with the same :data:`LENGTH_PAD` tokens of :data:`FILLER`, a
term no query can hold. BM25 then normalises by 1 - b + b·(dl + pad)/(avgdl + pad), which is
1 - b' + b'·dl/avgdl with b' = b·avgdl/(avgdl + pad): b' = 0.4 when pad = 0.875·avgdl. tantivy's
k1 = 1.2 (Pyserini: 0.9) stays.

Filters are exact terms (``shop_id``, ``service``) and fast columns (``price``, and
``service_bits``, one bit per service in SERVICES order, for filtering a few hundred hits
without the engine). ``rank`` is a unique integer per document — sold count in the high
bits, the inverse of the row number in the low bits — used to order top sellers and to
break score ties. The whole product is stored as JSON (``product``), the only stored field,
so that the index alone can return a :class:`Product`; what a search hit shows comes from
the hit table (:mod:`~shopbench.catalog.search.hit_table`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pydantic_core
import tantivy

from shopbench.catalog.schema import SERVICES
from shopbench.catalog.search.analysis import INDEX_TOKENIZER, index_terms

CONTENTS = "contents"
FILLER = "_"
"""The padding term of ``contents``: queries are split on anything but letters and digits,
so no query holds it."""
LENGTH_PAD = 19
"""Filler tokens at the end of every document's contents: 0.875 × 21.2, the mean length (in
analysed tokens) of a generated catalog's contents, so that b' = 0.75 · 21.2 / 40.2 = 0.40.
A catalog of another mean length m gets b' = 0.75 · m / (m + 19) (0.34 at m = 15, 0.46 at
m = 30). Part of the index format: change it only with INDEX_FORMAT."""
PRODUCT_ID = "product_id"
SHOP_ID = "shop_id"
SERVICE = "service"
SERVICE_BITS = "service_bits"
PRICE = "price"
RANK = "rank"
PRODUCT = "product"

_LOW = 32
_LOW_MASK = (1 << _LOW) - 1
MAX_ROWS = 1 << _LOW
"""An index holds at most this many products (the row number must fit the rank's low bits)."""

# pydantic_core's encoder is three times as fast as json's, and writes UTF-8 bytes directly.
_to_json = pydantic_core.to_json


def build_schema() -> tantivy.Schema:
    """The tantivy schema of a shopbench search index."""
    b = tantivy.SchemaBuilder()
    # Term frequencies are kept for BM25's sake; no positions: queries are bags of terms,
    # never phrases.
    b.add_text_field(CONTENTS, tokenizer_name=INDEX_TOKENIZER, index_option="freq")
    b.add_text_field(PRODUCT_ID, tokenizer_name="raw", index_option="basic")
    b.add_text_field(SHOP_ID, tokenizer_name="raw", index_option="basic")
    b.add_text_field(SERVICE, tokenizer_name="raw", index_option="basic")
    b.add_unsigned_field(SERVICE_BITS, fast=True)
    b.add_float_field(PRICE, fast=True)
    b.add_unsigned_field(RANK, fast=True)
    b.add_bytes_field(PRODUCT, stored=True)
    return b.build()


def rank_key(sold_count: int, row: int) -> int:
    """The document's unique rank: more sold first, then earlier rows first.

    Sold counts above 2**32 - 1 share the top bucket; `row` must be below MAX_ROWS.
    """
    return (min(sold_count, _LOW_MASK) << _LOW) | (_LOW_MASK - row)


_BIT = {name: 1 << i for i, name in enumerate(SERVICES)}


def service_bits(services: Iterable[str]) -> int:
    """The services as a bit set, one bit per name in SERVICES order; unknown names raise."""
    bits = 0
    for s in services:
        bits |= _BIT[s]
    return bits


_SERVICE_LISTS = [[n for n in SERVICES if bits & _BIT[n]] for bits in range(1 << len(SERVICES))]


def services_of(bits: int) -> list[str]:
    """The service names of a bit set made by :func:`service_bits`, in SERVICES order."""
    return list(_SERVICE_LISTS[bits])


def row_of(rank: int) -> int:
    """The row number a rank key was made from."""
    return _LOW_MASK - (rank & _LOW_MASK)


def contents_text(row: dict[str, Any]) -> str:
    """ShoppingBench's contents of a product: the title, its distinct SKU option values and its
    distinct attribute values (each value once, in first-seen order), as one text."""
    sku = dict.fromkeys(v for option in row["sku_options"].values() for v in option.values())
    attrs = dict.fromkeys(v for vs in row["attributes"].values() for v in vs)
    return " ".join((row["title"], *sku, *attrs))


_PAD = (" " + FILLER) * LENGTH_PAD


def to_document(row: dict[str, Any], row_no: int) -> tantivy.Document:
    """The index document for one product row (a dict with Product's fields)."""
    doc = tantivy.Document()
    doc.add_text(PRODUCT_ID, row["product_id"])
    doc.add_text(SHOP_ID, row["shop_id"])
    doc.add_text(CONTENTS, index_terms(contents_text(row)) + _PAD)
    for s in row["service"]:
        doc.add_text(SERVICE, s)
    doc.add_unsigned(SERVICE_BITS, service_bits(row["service"]))
    doc.add_float(PRICE, row["price"])
    doc.add_unsigned(RANK, rank_key(row["sold_count"], row_no))
    doc.add_bytes(PRODUCT, _to_json(row))
    return doc
