"""Choosing the ranked window: which documents, in which order, for one search.

The window is the `window` best documents matching at least one query term (see
:func:`text_query` for the terms left out) and every filter, by BM25 score; equal scores go
first to the product whose title is more about the query (:func:`title_relevance`: more
query words in the title, then more of the query's adjacent word pairs in the title, then
the shorter title), and only then to the rank field (better seller, then earlier product).
It is computed in one of two ways, whichever is cheaper:

* Post-filtering. The engine prunes an OR query very well on its own (block-max WAND) but
  must score every matching document once a broad filter (a price range, a service) is
  intersected with it. So for those filters the unfiltered top few hundred (or, when the
  filter passes few of them, a few thousand) are fetched and filtered on the fast columns;
  if enough of them pass, they are the answer.
* Filtering in the engine, for a shop (a short list that drives the intersection) and
  whenever post-filtering came up short.

Ties. Equal BM25 scores are common: listings of the same kind with the same length match the
same words as often. The engine breaks them by document address, which depends on how
documents fell into segments and differs from build to build. So hits are re-ordered here by
(score, title relevance, rank), and when a tie straddles the cut the fetch is widened to
``RankingConfig.tie_fetch`` documents: ties of up to that many documents at the cut are
decided the same way on every build. Beyond that
(thousands of documents matching the same words with the same lengths) the engine's choice
stands; widening further would cost more than the latency budget allows.

The thresholds of both choices are a :class:`RankingConfig`; a :class:`Ranker` applies one
to an index's searcher and counts which way each window was computed (:class:`RankingStats`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import tantivy
from pydantic import BaseModel, ConfigDict, Field

from shopbench.catalog.search import fields as F
from shopbench.catalog.search.analysis import title_relevance
from shopbench.catalog.search.filters import PriceRange

Scored = tuple[float, tantivy.DocAddress]
Ranked = tuple[float, int]
"""A hit of the window: (score, rank); the rank names the product's row (fields.row_of)."""
Titles = Callable[[list[int]], list[str]]
"""The titles of these rows, in the same order."""


class RankingConfig(BaseModel):
    """The tuning knobs of the ranked window.

    `common_share` and `common_min_docs` decide which query terms rank; the others move only
    the window's cost, never which documents it holds (up to ties wider than `tie_fetch`,
    see the module doc). The defaults are the release's: every validator ranks alike.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    common_share: float = Field(
        0.5, gt=0.0, le=1.0,
        description="a query term in more than this share of the products (and in more than"
        " `common_min_docs` of them) is left out when the query has other terms",
    )
    common_min_docs: int = Field(
        100_000, ge=0,
        description="a term is left out as too common only when more than this many products"
        " hold it: small catalogs keep every term",
    )
    tie_fetch: int = Field(
        400, ge=1,
        description="a tie at the window's cut is decided by rank when the tied documents all"
        " fall within the best this-many hits",
    )
    post_filter_factor: int = Field(
        8, ge=1,
        description="post-filtering first looks at the unfiltered top"
        " max(window * post_filter_factor, tie_fetch)",
    )
    max_post_fetch: int = Field(
        4000, ge=1,
        description="when few of those pass, post-filtering looks at most at this many before"
        " leaving the filter to the engine (past a few thousand, pruning without the filter"
        " stops paying for itself)",
    )


class RankingStats(BaseModel):
    """Which way the windows of text searches were computed, since the index was opened."""

    model_config = ConfigDict(frozen=True)

    post_filtered: int = Field(
        description="windows taken from the engine's unfiltered top hits, filtered on the fast"
        " columns"
    )
    engine_ranked: int = Field(
        description="windows the engine ranked with the filters inside its query: searches"
        " with no filter or with a shop, and those whose post-filtering came up short"
    )


class Filters:
    """Validated filters of one search, as engine queries and as a fast-column predicate."""

    def __init__(
        self,
        schema: tantivy.Schema,
        shop_id: str | None,
        price: PriceRange | None,
        services: Sequence[str],
    ) -> None:
        self.shop_id = shop_id
        self.price = price
        self.service_bits = F.service_bits(services)
        queries: list[tantivy.Query] = []
        if shop_id is not None:
            queries.append(tantivy.Query.term_query(schema, F.SHOP_ID, shop_id))
        for name in services:
            queries.append(tantivy.Query.term_query(schema, F.SERVICE, name))
        if price is not None:
            queries.append(
                tantivy.Query.range_query(
                    schema, F.PRICE, tantivy.FieldType.Float,
                    lower_bound=price[0], upper_bound=price[1],
                )
            )
        # Filters must not move the BM25 order, so each scores a constant 0.
        self.queries = [tantivy.Query.const_score_query(q, 0.0) for q in queries]

    def __bool__(self) -> bool:
        return bool(self.queries)

    def restrict(self, query: tantivy.Query) -> tantivy.Query:
        """`query` with every filter required."""
        if not self.queries:
            return query
        return tantivy.Query.boolean_query(
            [(tantivy.Occur.Must, query)] + [(tantivy.Occur.Must, q) for q in self.queries]
        )

    def passing(self, searcher: tantivy.Searcher, addrs: list[tantivy.DocAddress]) -> list[bool]:
        """Whether each document passes the price and service filters (not the shop)."""
        keep = [True] * len(addrs)
        if self.price is not None:
            lo, hi = self.price
            prices = searcher.fast_field_values(F.PRICE, addrs)
            keep = [
                k and (lo is None or p >= lo) and (hi is None or p <= hi)
                for k, p in zip(keep, prices, strict=True)
            ]
        if self.service_bits:
            need = self.service_bits
            bits = searcher.fast_field_values(F.SERVICE_BITS, addrs)
            keep = [k and (b & need) == need for k, b in zip(keep, bits, strict=True)]
        return keep


class Ranker:
    """The ranked windows of one index's searcher, tuned by a :class:`RankingConfig`.

    `titles` reads the titles of rows, for deciding ties. Shared by every thread searching
    the index; it counts which way each window was computed (:meth:`stats`).
    """

    def __init__(
        self, searcher: tantivy.Searcher, schema: tantivy.Schema, config: RankingConfig,
        titles: Titles,
    ) -> None:
        self.searcher = searcher
        self.schema = schema
        self.config = config
        self.titles = titles
        self._lock = threading.Lock()
        self._post_filtered = 0
        self._engine_ranked = 0

    def top_window(self, terms: Sequence[str], filters: Filters, window: int) -> list[Ranked]:
        """The `window` best matches of `terms` passing `filters`, best first (see module doc)."""
        searcher, config = self.searcher, self.config
        query = text_query(searcher, self.schema, terms, config)
        order = _Order(searcher, self.titles, terms)
        if filters and filters.shop_id is None:
            got = _post_filtered(searcher, query, filters, window, config, order)
            if got is not None:
                with self._lock:
                    self._post_filtered += 1
                return got
        with self._lock:
            self._engine_ranked += 1
        return _engine_top(searcher, filters.restrict(query), window, config.tie_fetch, order)

    def top_sellers(self, filters: Filters, window: int) -> list[Ranked]:
        """The `window` best sellers passing `filters` (all products if none), with score 0."""
        return top_sellers(self.searcher, filters, window)

    def stats(self) -> RankingStats:
        """How the windows of text searches were computed so far."""
        with self._lock:
            return RankingStats(
                post_filtered=self._post_filtered, engine_ranked=self._engine_ranked
            )


def text_query(
    searcher: tantivy.Searcher, schema: tantivy.Schema, terms: Sequence[str],
    config: RankingConfig,
) -> tantivy.Query:
    """BM25 OR of every term over the contents field, less the terms too common to rank.

    A term found in more than ``config.common_share`` of the products — a value
    nearly every product shares, such as a country of origin — weighs less than ln 2 in BM25
    yet makes the engine score most of the catalog, so on a large catalog (more than
    ``config.common_min_docs`` such products) it is left out whenever the query has another
    term. Terms that occur nowhere are left out too.
    """
    cutoff = max(config.common_share * searcher.num_docs, config.common_min_docs)
    found = []
    for t in terms:
        df = searcher.doc_freq(F.CONTENTS, t)
        if df:
            found.append((df, t))
    if any(df <= cutoff for df, _ in found):
        found = [p for p in found if p[0] <= cutoff]
    if not found:
        return tantivy.Query.empty_query()
    return tantivy.Query.boolean_query(
        [(tantivy.Occur.Should, tantivy.Query.term_query(schema, F.CONTENTS, t)) for _, t in found]
    )


def top_sellers(searcher: tantivy.Searcher, filters: Filters, window: int) -> list[Ranked]:
    """The `window` best sellers passing `filters` (all products if none), with score 0."""
    query = (
        tantivy.Query.boolean_query([(tantivy.Occur.Must, q) for q in filters.queries])
        if filters
        else tantivy.Query.all_query()
    )
    # rank is unique per product, so this order has no ties to break.
    found = searcher.search(
        query, limit=window, count=False, order_by_field=F.RANK, order=tantivy.Order.Desc
    ).hits
    return [(0.0, rank) for rank, _ in found]


class _Order:
    """Orders one search's scored hits by (score, title relevance, rank)."""

    def __init__(self, searcher: tantivy.Searcher, titles: Titles, terms: Sequence[str]) -> None:
        self.searcher = searcher
        self.titles = titles
        self.terms = terms

    def best(self, scored: list[Scored], window: int) -> list[Ranked]:
        """The best `window` of `scored` (in the engine's order, score descending)."""
        if len(scored) > window:
            # Only a tie across the cut can bring in a hit from past the window.
            cut, end = scored[window - 1][0], window
            while end < len(scored) and scored[end][0] == cut:
                end += 1
            scored = scored[:end]
        if not scored:
            return []
        scores = [s for s, _ in scored]
        ranks = self.searcher.fast_field_values(F.RANK, [a for _, a in scored])
        relevance = [(0, 0, 0)] * len(scored)
        # Titles are read only for hits that share their score with a neighbour.
        tied = [
            i for i, s in enumerate(scores)
            if (i and scores[i - 1] == s) or (i + 1 < len(scores) and scores[i + 1] == s)
        ]
        if tied:
            titles = self.titles([F.row_of(ranks[i]) for i in tied])
            for i, title in zip(tied, titles, strict=True):
                relevance[i] = title_relevance(self.terms, title)
        # All three descending; ranks are unique, so no two hits compare equal.
        keyed = sorted(zip(scores, relevance, ranks, strict=True), reverse=True)
        return [(s, r) for s, _, r in keyed[:window]]


def _engine_top(
    searcher: tantivy.Searcher, query: tantivy.Query, window: int, tie_fetch: int,
    order: _Order,
) -> list[Ranked]:
    limit = 2 * window
    found = searcher.search(query, limit=limit, count=False).hits
    # A full fetch whose last score equals the window's last may have cut a tie: widen once.
    if len(found) == limit and found[window - 1][0] == found[-1][0] and limit < tie_fetch:
        found = searcher.search(query, limit=tie_fetch, count=False).hits
    return order.best(found, window)


def _post_filtered(
    searcher: tantivy.Searcher, query: tantivy.Query, filters: Filters, window: int,
    config: RankingConfig, order: _Order,
) -> list[Ranked] | None:
    """The filtered window from the unfiltered top hits, or None if too few of them pass."""
    limit = max(config.post_filter_factor * window, config.tie_fetch)
    for _ in range(2):
        found = searcher.search(query, limit=limit, count=False).hits
        keep = filters.passing(searcher, [a for _, a in found])
        passed = [h for h, k in zip(found, keep, strict=True) if k]
        # Every match the fetch left out scores at most its last score, so when every text
        # match was seen, or `window` passing hits reach that score, no left-out match
        # could rank above them (ties at that score are the engine's choice, as in the
        # engine path).
        if len(found) < limit or len(passed) >= window:
            return order.best(passed, window)
        # Too few passed. If the pass rate so far promises enough within max_post_fetch,
        # fetch that many once (with a margin); else the engine's filter is cheaper.
        limit = 2 * window * limit // max(1, len(passed))
        if not passed or limit > config.max_post_fetch:
            return None
    return None
