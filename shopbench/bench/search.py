"""Search benchmark: latency and throughput of find_product-style queries on a catalog.

Queries are drawn, with the seed, from the catalog's own products: 2-5 consecutive words
of a title, the last sometimes replaced by one of the product's attribute or SKU values. Every other
query carries a filter near its source product (a price range around its price, one of its
services, or its shop). Each query asks for the whole top-50 window with a random sort, as
an agent's find_product call does. The index is read once before timing so that the figures
are those of a warm validator, whose index pages stay in the OS page cache.
"""

from __future__ import annotations

import json
import random
import re
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field

from shopbench.bench.stats import percentile
from shopbench.catalog.errors import CatalogError
from shopbench.catalog.layout import INDEX_DIR, read_manifest
from shopbench.catalog.schema import SORTS
from shopbench.catalog.search.index import SearchIndex

_WORD = re.compile(r"[^\W_]+")
_SAMPLE_COLUMNS = [
    "product_id", "shop_id", "title", "price", "service", "attributes", "sku_options"
]


class SearchBenchConfig(BaseModel):
    """What to measure."""

    model_config = ConfigDict(extra="forbid")

    catalog: Path = Field(description="catalog directory (with index/)")
    queries: int = Field(default=2000, ge=10, description="number of distinct queries")
    threads: int = Field(default=2, ge=1, description="threads sharing one index for qps_threads")
    seed: int = Field(default=0, description="seed for drawing the queries")


class BenchQuery(BaseModel):
    """One benchmark query: the text and the find_product filters."""

    model_config = ConfigDict(frozen=True)

    q: str
    shop_id: str | None = None
    price: tuple[float | None, float | None] | None = None
    service: tuple[str, ...] = ()
    sort: str = "default"

    @property
    def filtered(self) -> bool:
        """Whether any filter is set."""
        return self.shop_id is not None or self.price is not None or bool(self.service)


class SearchBenchResult(BaseModel):
    """The figures `shopbench bench search` prints."""

    products: int
    queries: int
    threads: int
    open_s: float = Field(description="seconds to open the index")
    p50_ms: float
    p99_ms: float
    filtered_p50_ms: float
    filtered_p99_ms: float
    qps: float = Field(description="queries per second, one thread")
    qps_threads: float = Field(description="queries per second, `threads` threads, one index")
    speedup: float = Field(description="qps_threads / qps")
    get_ms: float = Field(description="median time to fetch one product by id (warm)")
    empty_results: int = Field(description="queries that matched nothing")


def sample_products(catalog: Path, n: int, seed: int, max_parts: int = 8) -> list[dict[str, Any]]:
    """`n` products drawn with `seed` from up to `max_parts` of the catalog's Parquet parts.

    Parts are generated independently, so a few of them represent the catalog; reading
    only those keeps the set-up short on a 2.5M-product catalog.
    """
    manifest = read_manifest(catalog)
    if not manifest.product_files:
        raise CatalogError(f"{catalog}: catalog has no product files to draw queries from")
    rng = random.Random(seed)
    parts = sorted(rng.sample(manifest.product_files, min(max_parts, len(manifest.product_files))))
    table = pa.concat_tables(pq.read_table(catalog / f, columns=_SAMPLE_COLUMNS) for f in parts)
    rows = sorted(rng.sample(range(table.num_rows), min(n, table.num_rows)))
    out = table.take(rows).to_pylist()
    rng.shuffle(out)
    return out


def make_queries(products: list[dict[str, Any]], seed: int) -> list[BenchQuery]:
    """One query per product: 2-5 words of its title or values; every other one filtered."""
    rng = random.Random(seed)
    out: list[BenchQuery] = []
    for i, p in enumerate(products):
        words = _WORD.findall(p["title"])
        k = min(len(words), rng.randint(2, 5))
        start = rng.randrange(len(words) - k + 1) if words else 0
        text = words[start : start + k]
        if rng.random() < 0.3:
            values = [v for vs in json.loads(p["attributes"] or "{}").values() for v in vs]
            values += [v for o in json.loads(p["sku_options"] or "{}").values() for v in o.values()]
            if values:
                text = (text[:-1] + rng.choice(values).split())[:5]
        kw: dict[str, Any] = {"q": " ".join(text), "sort": rng.choice(SORTS)}
        if i % 2 == 1:
            kind = rng.choice(("price", "service", "shop"))
            if kind == "service" and p["service"]:
                kw["service"] = (rng.choice(p["service"]),)
            elif kind == "shop":
                kw["shop_id"] = p["shop_id"]
            else:
                kw["price"] = (round(p["price"] * 0.5), round(p["price"] * 2 + 1))
        out.append(BenchQuery(**kw))
    return out


def _run_one(index: SearchIndex, bq: BenchQuery) -> int:
    return len(index.search(bq.q, shop_id=bq.shop_id, price=bq.price, service=bq.service,
                            sort=bq.sort))


def _timed_pass(index: SearchIndex, queries: list[BenchQuery]) -> tuple[list[float], int, float]:
    lat: list[float] = []
    empty = 0
    t0 = time.perf_counter()
    for bq in queries:
        a = time.perf_counter()
        empty += _run_one(index, bq) == 0
        lat.append(time.perf_counter() - a)
    return lat, empty, time.perf_counter() - t0


def _threaded_pass(index: SearchIndex, queries: list[BenchQuery], threads: int) -> float:
    errors: list[BaseException] = []

    def work(part: list[BenchQuery]) -> None:
        try:
            for bq in part:
                _run_one(index, bq)
        except BaseException as e:  # re-raised in the caller below
            errors.append(e)

    pool = [threading.Thread(target=work, args=(queries[i::threads],)) for i in range(threads)]
    t0 = time.perf_counter()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    elapsed = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return elapsed


def run(cfg: SearchBenchConfig) -> SearchBenchResult:
    """Open the catalog's index, warm it with one pass, then time single- and multi-threaded."""
    products = sample_products(cfg.catalog, cfg.queries, cfg.seed)
    queries = make_queries(products, cfg.seed)
    t0 = time.perf_counter()
    index = SearchIndex.open(cfg.catalog / INDEX_DIR)
    open_s = time.perf_counter() - t0
    for bq in queries:  # warm-up: fault the index pages in, as a running validator has
        _run_one(index, bq)
    lat, empty, elapsed = _timed_pass(index, queries)
    filtered = [x for x, bq in zip(lat, queries, strict=True) if bq.filtered]
    threaded = _threaded_pass(index, queries, cfg.threads)
    ids = [p["product_id"] for p in products[:500]]
    index.get(ids)  # warm-up, as for the searches
    get_lat = []
    for pid in ids:
        a = time.perf_counter()
        index.get([pid])
        get_lat.append(time.perf_counter() - a)
    return SearchBenchResult(
        products=len(index),
        queries=len(queries),
        threads=cfg.threads,
        open_s=round(open_s, 4),
        p50_ms=round(percentile(lat, 0.5) * 1000, 3),
        p99_ms=round(percentile(lat, 0.99) * 1000, 3),
        filtered_p50_ms=round(percentile(filtered, 0.5) * 1000, 3),
        filtered_p99_ms=round(percentile(filtered, 0.99) * 1000, 3),
        qps=round(len(queries) / elapsed, 1),
        qps_threads=round(len(queries) / threaded, 1),
        speedup=round(elapsed / threaded, 2),
        get_ms=round(statistics.median(get_lat) * 1000, 4),
        empty_results=empty,
    )
