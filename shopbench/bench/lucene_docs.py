"""A catalog as ShoppingBench's Lucene collection: one JSON document per product.

ShoppingBench's ``convert_products_to_documents.py`` indexes each product as ``{"id",
"contents", "product"}``, where ``contents`` is three lines: the title, the distinct SKU
option values, and the distinct attribute values (the brand only where an attribute holds
it). Pyserini's ``JsonCollection`` indexes ``contents`` with Lucene's English analyzer, and
ShoppingBench's server reads the filters' fields back from the stored raw ``product``.
Distinct values are kept in first-seen order (ShoppingBench uses a set, whose order changes
from run to run; BM25 scores a bag of words, so the order never moves a score).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from shopbench.catalog.layout import read_manifest

DOCS_FILE = "docs.jsonl"
"""The collection's one file, in the collection directory."""

_BATCH_ROWS = 8192


def contents_of(product: Mapping[str, Any]) -> str:
    """ShoppingBench's ``contents`` of a product (a mapping with Product's fields, its
    ``sku_options`` and ``attributes`` already parsed): title, SKU values, attribute values,
    one line each, each value once per line."""
    sku_values = dict.fromkeys(v for option in product["sku_options"].values()
                               for v in option.values())
    attr_values = dict.fromkeys(v for vs in product["attributes"].values() for v in vs)
    return "\n".join((product["title"], " ".join(sku_values), " ".join(attr_values)))


def document_of(product: Mapping[str, Any]) -> dict[str, Any]:
    """The collection document of one product: ``id``, ``contents`` and the whole
    ``product``, as ShoppingBench writes it."""
    return {"id": product["product_id"], "contents": contents_of(product),
            "product": dict(product)}


def catalog_products(catalog: Path) -> Iterator[dict[str, Any]]:
    """Every product of a catalog directory, in build order, as a dict with Product's fields
    (``sku_options`` and ``attributes`` parsed from their stored JSON)."""
    manifest = read_manifest(catalog)
    for name in manifest.product_files:
        for batch in pq.ParquetFile(catalog / name).iter_batches(batch_size=_BATCH_ROWS):
            for row in batch.to_pylist():
                row["sku_options"] = json.loads(row["sku_options"] or "{}")
                row["attributes"] = json.loads(row["attributes"] or "{}")
                row.pop("base_id", None)
                yield row


def write_collection(catalog: Path, directory: Path) -> int:
    """Write the catalog's collection to ``directory/docs.jsonl`` (replacing any); returns the
    number of documents."""
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / (DOCS_FILE + ".tmp")
    n = 0
    with tmp.open("w", encoding="utf-8") as out:
        for product in catalog_products(catalog):
            out.write(json.dumps(document_of(product), ensure_ascii=False) + "\n")
            n += 1
    tmp.replace(directory / DOCS_FILE)
    return n
