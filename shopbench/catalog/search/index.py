"""The embedded search index over a catalog: ShoppingBench's ``find_product`` on tantivy.

Ranking is Lucene-style BM25 over an OR of the query's terms (as ShoppingBench's own Lucene
index ranks), so a product matching more of the query's words ranks higher but one missing
a word still appears: "wireless earbuds" puts earbuds that are wireless first, then other
earbuds and wireless things. The window is the top ``window`` (50) matches that pass every
filter (shop, inclusive price range, all listed services) — exactly those, however
:mod:`shopbench.catalog.search.ranking` computes them — then sorted in Python by the requested sort
and served 10 per page.

A query with no searchable term left after analysis (empty, only stop words or punctuation)
returns the filtered top sellers — most sold first, with score 0 — so that browsing a shop
with an empty query works; with no filter either, those are the catalog's top sellers.

Equal scores go to the better seller, then to the earlier product in build order, the
same way on every build of a catalog (up to the limit that :mod:`~shopbench.catalog.search.ranking`
explains: a tie of more than 400 documents at the window's cut is the engine's choice).

One :class:`SearchIndex` may be shared by many threads (searches release the GIL), and many
processes may open the same directory (the files are memory-mapped, so they share memory).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import tantivy
from pydantic import BaseModel, ConfigDict, ValidationError

from shopbench.catalog.errors import CatalogError
from shopbench.catalog.schema import Product
from shopbench.catalog.search import fields as F
from shopbench.catalog.search.analysis import query_terms
from shopbench.catalog.search.filters import (
    PAGE_SIZE,
    WINDOW,
    PriceRange,
    check_page,
    check_price,
    check_services,
    check_shop_id,
    check_sort,
    check_window,
    parse_price,
)
from shopbench.catalog.search.hit_table import HitTable
from shopbench.catalog.search.ranking import (
    Filters,
    Ranked,
    Ranker,
    RankingConfig,
    RankingStats,
)
from shopbench.catalog.search.writer import INDEX_FORMAT, MARKER, IndexWriter

__all__ = ["IndexWriter", "SearchHit", "SearchIndex", "TitledHit", "parse_price"]

_MIN_HEAP_MB_PER_THREAD = 16  # tantivy refuses less than 15 MB of writer heap per thread


class SearchHit(BaseModel):
    """One ranked result of a search: the fields ShoppingBench's find_product shows.

    `service` lists the product's services in SERVICES order; `score` is the BM25 score
    (0 for the top sellers an empty query lists).
    """

    model_config = ConfigDict(frozen=True)

    product_id: str
    shop_id: str
    title: str
    price: float
    service: list[str]
    sold_count: int
    score: float


class TitledHit(NamedTuple):
    """A hit's product id and title, in its window's order (:meth:`SearchIndex.search_titles`)."""

    product_id: str
    title: str


class SearchIndex:
    """A read-only, memory-mapped search index over one catalog's products.

    `ranking` tunes how the ranked window is computed (its cost, not its contents); it
    defaults to :class:`RankingConfig`'s defaults.
    """

    def __init__(
        self, path: Path, index: tantivy.Index, table: HitTable,
        ranking: RankingConfig | None = None,
    ) -> None:
        self.path = path
        self._index = index
        self._schema = index.schema
        self._searcher = index.searcher()
        self._size = self._searcher.num_docs
        self._table = table
        self._ranker = Ranker(
            self._searcher, self._schema, ranking or RankingConfig(), self._titles
        )

    @property
    def ranking(self) -> RankingConfig:
        """The ranking knobs this index searches with."""
        return self._ranker.config

    def stats(self) -> RankingStats:
        """Which way this index computed the windows of its text searches since it was opened."""
        return self._ranker.stats()

    @classmethod
    def create(cls, path: Path, *, heap_mb: int = 512, threads: int = 2) -> IndexWriter:
        """Start a new, empty index at `path` (absent or an empty directory).

        `heap_mb` bounds the writer's indexing memory (split between `threads` indexing
        threads; at least 16 MB each). Use the returned writer as a context manager.
        """
        path = Path(path)
        if threads < 1:
            raise CatalogError(f"index threads must be at least 1, got {threads}")
        if heap_mb < _MIN_HEAP_MB_PER_THREAD * threads:
            raise CatalogError(
                f"index heap of {heap_mb} MB is too small for {threads} threads;"
                f" give at least {_MIN_HEAP_MB_PER_THREAD * threads} MB"
            )
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            raise CatalogError(f"{path}: exists and is not an empty directory; refusing to index")
        path.mkdir(parents=True, exist_ok=True)
        # Not sorted by rank (the engine could, but rewrites the whole document store to do
        # it, for a build that is then slower and larger): ties are broken in ranking.py.
        index = tantivy.Index(F.build_schema(), path=str(path), reuse=False)
        return IndexWriter(path, index, heap_mb, threads)

    @classmethod
    def open(cls, path: Path, *, ranking: RankingConfig | None = None) -> SearchIndex:
        """Open the index at `path` for searching, tuned by `ranking` (the defaults if None);
        CatalogError naming the path otherwise."""
        path = Path(path)
        if not path.is_dir():
            raise CatalogError(f"{path}: search index directory does not exist")
        marker = path / MARKER
        try:
            meta = json.loads(marker.read_text())
        except FileNotFoundError:
            raise CatalogError(
                f"{path}: not a shopbench search index, or its build never committed"
            ) from None
        except (OSError, json.JSONDecodeError) as e:
            raise CatalogError(f"{marker}: unreadable ({e})") from None
        version = meta.get("index_format") if isinstance(meta, dict) else None
        if version != INDEX_FORMAT:
            raise CatalogError(
                f"{path}: search index format {version!r}, this shopbench reads {INDEX_FORMAT};"
                " rebuild the catalog"
            )
        try:
            index = tantivy.Index.open(str(path))
        except (OSError, ValueError) as e:
            raise CatalogError(f"{path}: cannot open search index ({e})") from None
        # Read-only: no watcher thread, no reloads; one searcher serves every query.
        index.config_reader(reload_policy="Manual")
        table = HitTable.open(path)
        n_docs = index.searcher().num_docs
        if not n_docs == len(table) == meta.get("products"):
            raise CatalogError(
                f"{path}: search index is inconsistent ({n_docs} documents, {len(table)} hit"
                f" rows, {meta.get('products')} products committed); rebuild the catalog"
            )
        return cls(path, index, table, ranking)

    def __len__(self) -> int:
        return self._size

    def search(
        self,
        q: str,
        *,
        shop_id: str | None = None,
        price: PriceRange | str | None = None,
        service: Sequence[str] | str = (),
        sort: str = "default",
        window: int = WINDOW,
    ) -> list[SearchHit]:
        """The whole ranked window: BM25's top `window` matches of `q` after the filters,
        then ordered by `sort` (``default`` keeps BM25 order; ``priceasc``/``pricedesc`` by
        price; ``order`` by sold count, most first; ties go to the better BM25 score).

        `price` is an inclusive (low, high) range (either side None) or a ``"lo-hi"``
        string; `service` lists services a product must all have (or is one comma-separated
        string). Invalid arguments raise SearchError naming the argument and allowed values.
        """
        sort = check_sort(sort)
        hits = self._hits(self._window(q, shop_id, price, service, window))
        if sort == "priceasc":
            hits.sort(key=lambda h: h.price)
        elif sort == "pricedesc":
            hits.sort(key=lambda h: -h.price)
        elif sort == "order":
            hits.sort(key=lambda h: -h.sold_count)
        # list.sort is stable: hits equal on the sort key keep their ranking order.
        return hits

    def search_titles(
        self,
        q: str,
        *,
        price: PriceRange | str | None = None,
        service: Sequence[str] | str = (),
        window: int = WINDOW,
    ) -> list[TitledHit]:
        """The product id and title of each hit of :meth:`search`'s window (default order),
        without the rest of the hit: for callers that read only these of many windows, as
        task generation does. Arguments and errors as :meth:`search`'s."""
        picked = self._window(q, None, price, service, window)
        return [TitledHit(*row) for row in self._table.titles([F.row_of(r) for _, r in picked])]

    def _window(
        self,
        q: str,
        shop_id: str | None,
        price: PriceRange | str | None,
        service: Sequence[str] | str,
        window: int,
    ) -> list[Ranked]:
        """The ranked window of a search, before any sort (arguments checked here)."""
        window = check_window(window)
        filters = Filters(
            self._schema, check_shop_id(shop_id), check_price(price), check_services(service)
        )
        terms = query_terms(q) if isinstance(q, str) else []
        if terms:
            return self._ranker.top_window(terms, filters, window)
        return self._ranker.top_sellers(filters, window)

    def find(
        self,
        q: str,
        page: int = 1,
        *,
        shop_id: str | None = None,
        price: PriceRange | str | None = None,
        service: Sequence[str] | str = (),
        sort: str = "default",
    ) -> list[SearchHit]:
        """ShoppingBench's find_product: page `page` (1-5, 10 hits each) of the sorted top-50
        window of :meth:`search`; a page past the last hit is empty."""
        page = check_page(page)
        hits = self.search(q, shop_id=shop_id, price=price, service=service, sort=sort)
        return hits[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]

    def get(self, product_ids: Sequence[str]) -> list[Product | None]:
        """The products with these catalog ids, in the same order; None for an unknown id."""
        ids = [product_ids] if isinstance(product_ids, str) else list(product_ids)
        found: dict[str, Product | None] = {}
        s = self._searcher
        for pid in ids:
            if pid in found or not isinstance(pid, str):
                continue
            # One term lookup per id: far cheaper here than one set query for all of them.
            hits = s.search(
                tantivy.Query.term_query(self._schema, F.PRODUCT_ID, pid), limit=1, count=False
            ).hits
            found[pid] = self._product(s.doc(hits[0][1]).get_first(F.PRODUCT)) if hits else None
        return [found.get(pid) if isinstance(pid, str) else None for pid in ids]

    def _hits(self, ranked: list[Ranked]) -> list[SearchHit]:
        rows = self._table.rows([F.row_of(rank) for _, rank in ranked])
        return [
            SearchHit(
                product_id=pid, shop_id=shop, title=title, price=price,
                service=F.services_of(bits), sold_count=sold, score=score,
            )
            for (score, _), (pid, shop, title, price, sold, bits) in zip(ranked, rows, strict=True)
        ]

    def _titles(self, rows: list[int]) -> list[str]:
        return [title for _, title in self._table.titles(rows)]

    def _product(self, raw: bytes) -> Product:
        try:
            return Product.model_validate_json(raw)
        except ValidationError as e:
            raise CatalogError(
                f"{self.path}: corrupt stored product ({e.error_count()} errors)"
            ) from None
