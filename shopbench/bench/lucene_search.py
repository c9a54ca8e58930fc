"""ShoppingBench's find_product on Pyserini, answering one JSON line per query line.

Run by the Lucene virtual environment's python (``scripts/lucene_env.sh``), which has
Pyserini but not shopbench, so this file imports only the standard library and, inside
:func:`main`, Pyserini::

    .venv-lucene/bin/python shopbench/bench/lucene_search.py INDEX_DIR

It prints ``{"ready": true, "docs": N}`` once the index is open, then answers each request
line ``{"q", "shop_id", "price": [lo, hi] | null, "service": [...], "sort", "k"}`` with
``{"ids": [...], "scores": [...], "ms": ...}``: the ids of page 1, the BM25 scores of the
first 11 unfiltered hits, and the milliseconds the search took (the steps below, without
the JSON lines). The steps are those of ShoppingBench's ``server.py``: Lucene BM25 top
``k`` with duplicates removed, each hit's stored product read back and dropped unless it
passes the shop, price (inclusive) and service filters, the first 50 survivors kept, sorted
by ``order`` (sold count, most first), ``priceasc`` or ``pricedesc`` (stable, so equal keys
keep BM25 order), and cut to a page of 10. ShoppingBench parses the raw JSON with ujson;
this uses the standard library's.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

WINDOW = 50
PAGE_SIZE = 10
TIE_DEPTH = 11


def passes(product: dict[str, Any], shop_id: str | None, price: list[float | None] | None,
           service: list[str]) -> bool:
    """Whether a stored product survives ShoppingBench's shop, price and service filters."""
    if shop_id and shop_id != product.get("shop_id"):
        return False
    if price is not None:
        lo, hi = price
        if lo is not None and product["price"] < lo:
            return False
        if hi is not None and product["price"] > hi:
            return False
    have = product.get("service", [])
    return all(s in have for s in service)


def sort_window(products: list[dict[str, Any]], sort: str | None) -> None:
    """Sort the window in place as ShoppingBench does; ``default`` (or None) keeps BM25 order."""
    if sort == "order":
        products.sort(key=lambda x: x["sold_count"], reverse=True)
    elif sort == "priceasc":
        products.sort(key=lambda x: x["price"])
    elif sort == "pricedesc":
        products.sort(key=lambda x: x["price"], reverse=True)


def answer(searcher: Any, request: dict[str, Any]) -> dict[str, Any]:
    """One find_product call (page 1) on `searcher`, timed."""
    t0 = time.perf_counter()
    hits = searcher.search(q=request["q"], k=request["k"], remove_dups=True)
    window: list[dict[str, Any]] = []
    for hit in hits:
        product = json.loads(searcher.doc(hit.docid).raw())["product"]
        if passes(product, request.get("shop_id"), request.get("price"),
                  request.get("service") or []):
            window.append(product)
            if len(window) >= WINDOW:
                break
    sort_window(window, request.get("sort"))
    ids = [p["product_id"] for p in window[:PAGE_SIZE]]
    ms = (time.perf_counter() - t0) * 1000
    return {"ids": ids, "scores": [h.score for h in hits[:TIE_DEPTH]], "ms": ms}


def main(argv: list[str]) -> int:
    """Open the index named by ``argv[1]`` and answer request lines until stdin closes."""
    if len(argv) != 2:
        print("usage: lucene_search.py INDEX_DIR", file=sys.stderr)
        return 2
    from pyserini.search.lucene import LuceneSearcher

    searcher = LuceneSearcher(argv[1])
    out = sys.stdout
    out.write(json.dumps({"ready": True, "docs": searcher.num_docs}) + "\n")
    out.flush()
    for line in sys.stdin:
        if line.strip():
            out.write(json.dumps(answer(searcher, json.loads(line))) + "\n")
            out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
