"""Relevance benchmark: our find_product against ShoppingBench's own Lucene stack.

The queries are those `shopbench bench search` draws with the same seed
(:func:`~shopbench.bench.search.make_queries`). Each one goes, with its filters and sort,
through :meth:`SearchIndex.find` and through ShoppingBench's search logic on Pyserini
(:mod:`.lucene`, in the Lucene environment's python), and page 1 of both is compared
(:mod:`.relevance_measures` says how). Both engines answer every query once to warm up
(the JVM compiles its hot paths, tantivy's pages come into the page cache), then once
timed, each in one process and one thread; the Lucene side times its own searches, so the
pipe between the processes is left out.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from shopbench.bench.lucene import LuceneSearcher, ensure_index
from shopbench.bench.lucene_docs import contents_of
from shopbench.bench.relevance_measures import TIE_EPSILON, has_all_words, jaccard, tie_at_cut
from shopbench.bench.search import BenchQuery, make_queries, sample_products
from shopbench.bench.stats import percentile
from shopbench.catalog.layout import INDEX_DIR, read_manifest
from shopbench.catalog.search.analysis import build_analyzer
from shopbench.catalog.search.index import SearchIndex

DEFAULT_LUCENE_PYTHON = Path(".venv-lucene/bin/python")


class RelevanceBenchConfig(BaseModel):
    """What to compare."""

    model_config = ConfigDict(extra="forbid")

    catalog: Path = Field(description="catalog directory (with index/)")
    queries: int = Field(default=2000, ge=10, description="number of distinct queries")
    seed: int = Field(default=0, description="seed for drawing the queries")
    k: int = Field(
        default=1000, ge=50, le=1_000_000,
        description="Lucene hits fetched before the filters (ShoppingBench ships 100000)",
    )
    lucene_python: Path = Field(
        default=DEFAULT_LUCENE_PYTHON,
        description="python of the Lucene environment (scripts/lucene_env.sh creates it)",
    )
    work: Path | None = Field(
        default=None,
        description="cache directory for the Lucene collection and index"
        " (default: <catalog>.lucene next to the catalog)",
    )


class RelevanceBenchResult(BaseModel):
    """The figures `shopbench bench relevance` prints."""

    products: int
    queries: int
    unfiltered_queries: int
    k: int = Field(description="Lucene hits fetched before the filters")
    jaccard_mean: float = Field(description="mean Jaccard of the page-1 ids of both engines")
    jaccard_median: float
    disjoint_share: float = Field(description="share of queries whose pages share no id")
    all_words_ours: float = Field(description="share of our page-1 hits holding every query term")
    all_words_lucene: float = Field(description="the same for Lucene's page-1 hits")
    tie_ours: float = Field(
        description="share of unfiltered queries (with 11 hits or more) whose 10th and 11th"
        " hits by relevance score within 1e-5 (for Lucene: a tie Anserini broke by id)"
    )
    tie_lucene: float
    exact_tie_ours: float = Field(
        description="the same share with equal scores only (for Lucene: as Pyserini returns"
        " them, after Anserini's tie adjustment)"
    )
    exact_tie_lucene: float
    ours_p50_ms: float
    ours_p99_ms: float
    lucene_p50_ms: float
    lucene_p99_ms: float
    speedup_p50: float = Field(description="lucene_p50_ms / ours_p50_ms")
    speedup_p99: float = Field(description="lucene_p99_ms / ours_p99_ms")
    empty_ours: int = Field(description="queries whose page 1 is empty on our engine")
    empty_lucene: int


class _Terms:
    """Analysed terms of texts, by shopbench's analyzer: one definition for both engines."""

    def __init__(self) -> None:
        self._analyzer = build_analyzer()

    def __call__(self, text: str) -> list[str]:
        return list(dict.fromkeys(self._analyzer.analyze(text)))


def _ours(index: SearchIndex, bq: BenchQuery) -> list[str]:
    hits = index.find(bq.q, 1, shop_id=bq.shop_id, price=bq.price, service=bq.service,
                      sort=bq.sort)
    return [h.product_id for h in hits]


def _lucene(lucene: LuceneSearcher, bq: BenchQuery) -> tuple[list[str], list[float], float]:
    a = lucene.find(bq.q, shop_id=bq.shop_id, price=bq.price, service=bq.service, sort=bq.sort)
    return a.ids, a.scores, a.ms / 1000


def _share(flags: Sequence[bool | None]) -> float:
    counted = [f for f in flags if f is not None]
    return round(sum(counted) / len(counted), 4) if counted else 0.0


def _ties(scores: list[list[float] | None], epsilon: float = TIE_EPSILON) -> float:
    return _share([tie_at_cut(s, epsilon=epsilon) for s in scores if s is not None])


def _all_words_share(
    index: SearchIndex, queries: list[BenchQuery], pages: list[list[str]], terms: _Terms
) -> float:
    ids = list(dict.fromkeys(pid for page in pages for pid in page))
    contents = {
        pid: set(terms(contents_of(p.model_dump())))
        for pid, p in zip(ids, index.get(ids), strict=True) if p is not None
    }
    flags = [
        has_all_words(terms(bq.q), contents.get(pid, set()))
        for bq, page in zip(queries, pages, strict=True) for pid in page
    ]
    return _share(flags)


def run(cfg: RelevanceBenchConfig, say: Callable[[str], None] = lambda _: None
        ) -> RelevanceBenchResult:
    """Draw the queries, build (or reuse) the Lucene index, run both engines, compare."""
    read_manifest(cfg.catalog)
    queries = make_queries(sample_products(cfg.catalog, cfg.queries, cfg.seed), cfg.seed)
    index = SearchIndex.open(cfg.catalog / INDEX_DIR)
    work = cfg.work or cfg.catalog.parent / f"{cfg.catalog.name}.lucene"
    say(f"Lucene index of {cfg.catalog} under {work}")
    lucene_index = ensure_index(cfg.catalog, work, cfg.lucene_python)
    with LuceneSearcher(cfg.lucene_python, lucene_index, cfg.k) as lucene:
        say(f"warming both engines on {len(queries)} queries")
        for bq in queries:
            _ours(index, bq)
            _lucene(lucene, bq)
        say("timed pass")
        ours_pages, ours_lat, lucene_pages, lucene_lat = [], [], [], []
        lucene_scores: list[list[float] | None] = []
        for bq in queries:
            t0 = time.perf_counter()
            ours_pages.append(_ours(index, bq))
            ours_lat.append(time.perf_counter() - t0)
            ids, scores, seconds = _lucene(lucene, bq)
            lucene_pages.append(ids)
            lucene_lat.append(seconds)
            lucene_scores.append(None if bq.filtered else scores)
    ours_scores = [
        None if bq.filtered else [h.score for h in index.search(bq.q)] for bq in queries
    ]
    overlaps = [jaccard(a, b) for a, b in zip(ours_pages, lucene_pages, strict=True)]
    terms = _Terms()
    ours_p50, lucene_p50 = percentile(ours_lat, 0.5), percentile(lucene_lat, 0.5)
    ours_p99, lucene_p99 = percentile(ours_lat, 0.99), percentile(lucene_lat, 0.99)
    return RelevanceBenchResult(
        products=len(index),
        queries=len(queries),
        unfiltered_queries=sum(not bq.filtered for bq in queries),
        k=cfg.k,
        jaccard_mean=round(statistics.fmean(overlaps), 4),
        jaccard_median=round(statistics.median(overlaps), 4),
        disjoint_share=_share([
            not set(a) & set(b) and bool(a or b)
            for a, b in zip(ours_pages, lucene_pages, strict=True)
        ]),
        all_words_ours=_all_words_share(index, queries, ours_pages, terms),
        all_words_lucene=_all_words_share(index, queries, lucene_pages, terms),
        tie_ours=_ties(ours_scores),
        tie_lucene=_ties(lucene_scores),
        exact_tie_ours=_ties(ours_scores, epsilon=0.0),
        exact_tie_lucene=_ties(lucene_scores, epsilon=0.0),
        ours_p50_ms=round(ours_p50 * 1000, 3),
        ours_p99_ms=round(ours_p99 * 1000, 3),
        lucene_p50_ms=round(lucene_p50 * 1000, 3),
        lucene_p99_ms=round(lucene_p99 * 1000, 3),
        speedup_p50=round(lucene_p50 / ours_p50, 2) if ours_p50 else 0.0,
        speedup_p99=round(lucene_p99 / ours_p99, 2) if ours_p99 else 0.0,
        empty_ours=sum(not p for p in ours_pages),
        empty_lucene=sum(not p for p in lucene_pages),
    )
