"""The cheap paths task generation reads many windows through: titled windows, the title
screen and the pool's pair screen give exactly what the full paths give."""

from __future__ import annotations

from typing import Any

import pytest

from shopbench.catalog.errors import SearchError
from shopbench.catalog.schema import Product
from shopbench.outcome.grader import DEFAULT_MATCHER
from shopbench.tasks.pool import Pool
from shopbench.tasks.satisfy import TitleScreen


@pytest.fixture(scope="module")
def products(catalog: Any) -> list[Product]:
    return [p for batch in catalog.iter_products() for p in batch]


def test_titled_window_is_the_full_window_without_the_other_fields(
    catalog: Any, products: list[Product]
) -> None:
    index = catalog.index
    queries = [" ".join(p.title.split()[:3]) for p in products[::150]] + ["", "the of and"]
    filters: list[dict[str, Any]] = [
        {},
        {"price": (100.0, None)},
        {"price": "50-2000", "service": ["COD"]},
        {"service": "official,freeShipping"},
    ]
    seen = 0
    for q in queries:
        for kwargs in filters:
            for window in (50, 100, 7):
                full = index.search(q, window=window, **kwargs)
                titled = index.search_titles(q, window=window, **kwargs)
                assert [(h.product_id, h.title) for h in full] == [tuple(t) for t in titled]
                assert [t.product_id for t in titled] == [h.product_id for h in full]
                seen += len(titled)
    assert seen > 1000  # the windows compared are not empty


def test_titled_window_rejects_what_search_rejects(catalog: Any) -> None:
    for kwargs, message in [
        ({"window": 0}, "window 0 must be an integer from 1 to 1000"),
        ({"price": "cheap"}, "price 'cheap' is not a price range"),
        ({"service": ["teleport"]}, "teleport"),
    ]:
        with pytest.raises(SearchError, match=message):
            catalog.index.search("helmet", **kwargs)
        with pytest.raises(SearchError, match=message):
            catalog.index.search_titles("helmet", **kwargs)


def test_title_screen_keeps_matches_and_drops_other_products(products: list[Product]) -> None:
    target = "Damaris Sports Lightweight Durable Cycling Helmet"
    screen = TitleScreen(DEFAULT_MATCHER, [target], knowledge=False)
    for same in [target, f"Hot Sale {target}s 2pcs", "DAMARIS sports lightweight cycling helmet"]:
        assert DEFAULT_MATCHER.match(same, target).hit
        assert screen.may_match(same) and screen.matches(same), same
    for other in ["Nordic Thermal Window Curtain Blue", "Damaris Sports Water Bottle 1L"]:
        assert not screen.may_match(other), other
    # On the fixture catalog the screen rules out most titles against a product's own.
    titles = [p.title for p in products]
    for p in products[::400]:
        own = TitleScreen(DEFAULT_MATCHER, [p.title], knowledge=False)
        passed = [t for t in titles if own.may_match(t)]
        assert p.title in passed and len(passed) < 0.2 * len(titles)
        hits = {t for t in titles if DEFAULT_MATCHER.match(t, p.title).hit}
        assert hits <= set(passed)


def test_pair_screen_judges_many_rows_as_each_alone(catalog: Any, products: list[Product]) -> None:
    pool = Pool(catalog, lambda group: True)
    assert pool.load_pair_text(catalog)
    sample = [next(p for p in products if p.attributes), *products[::37]]
    rows = pool.rows_of([p.product_id for p in sample])
    assert None not in rows
    known = [r for r in rows if r is not None]
    p = sample[0]
    asked = [(k, v) for k, vs in p.attributes.items() for v in vs][:2] or [("size", "m")]
    together = pool.screen_pairs(known, asked)
    assert together == [pool.screen_pairs([r], asked)[0] for r in known]
    assert together[0] and not all(together)  # the first row has the pairs, not every row
    assert pool.screen_pairs(known, []) == [True] * len(known)
    assert pool.groups_of(known).tolist() == [
        pool.group_keys.index(q.group_key) for q in sample
    ]
