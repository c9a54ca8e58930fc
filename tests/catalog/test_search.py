"""The search index: ranking, filters, sorts, pages, fetch by id, rejections, the CLI."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
import typer
from pydantic import ValidationError
from typer.testing import CliRunner

from shopbench.catalog.errors import CatalogError, SearchError
from shopbench.catalog.schema import Product
from shopbench.catalog.search.filters import parse_price
from shopbench.catalog.search.index import MARKER, SearchIndex
from shopbench.catalog.search.ranking import RankingConfig, RankingStats
from shopbench.catalog.search.writer import INDEX_FORMAT as FMT


def row(
    pid: str, title: str, *, shop: str = "1", price: float = 100.0, sold: int = 0,
    service: tuple[str, ...] = (), sku: dict[str, dict[str, str]] | None = None,
    attrs: dict[str, list[str]] | None = None, brand: str = "",
) -> dict[str, Any]:
    """A product row with exactly Product's fields."""
    return Product(
        product_id=pid, shop_id=shop, brand=brand, category="Test > Things > Stuff",
        title=title, price=price, sold_count=sold, service=list(service),
        sku_options=sku or {}, attributes=attrs or {},
    ).model_dump()


GADGETS = [
    row("101", "Wireless Bluetooth Earbuds Noise Cancelling", shop="11", price=899, sold=500,
        service=("official", "COD")),
    row("102", "Sport Wireless Earbuds Waterproof", shop="12", price=1499, sold=40,
        service=("official", "COD", "flashsale")),
    row("103", "Wired Earbuds 3.5mm Jack", shop="11", price=199, sold=1200, service=("COD",)),
    row("104", "Wireless Mouse Silent Click", shop="12", price=350, sold=300,
        service=("freeShipping",)),
    row("105", "Wireless Charger Fast Charging Pad", shop="13", price=650, sold=80,
        service=("official",)),
    row("106", "Wireless Keyboard Compact", shop="13", price=1200, sold=60),
    row("107", "Wireless Speaker Portable", shop="13", price=2500, sold=10),
    row("108", "Café Latte Mug Ceramic", shop="14", price=250, sold=5),
    row("109", "Running Shoes", shop="14", price=2999, sold=70, brand="Stride",
        sku={"0": {"color_family": "crimson", "size": "42"},
             "1": {"color_family": "crimson", "size": "43"}}, attrs={"brand": ["stride"]}),
    row("110", "Cotton Socks", shop="14", price=99, sold=900, attrs={"material": ["bamboo fiber"]}),
]
# 60 listings with the same title: equal scores everywhere, so ties decide every order.
# Sold counts are a permutation of 0..59 unrelated to insertion order.
TEES = [
    row(str(200 + i), "Plain Tee Shirt", shop=str(20 + i % 3), price=100.0 + (i * 7) % 60,
        sold=(i * 37) % 60, service=("COD",) if i % 2 else ())
    for i in range(60)
]
ROWS = GADGETS + TEES
EARBUDS = {"101", "102", "103"}


def ids(hits: list[Any]) -> list[str]:
    return [h.product_id for h in hits]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> SearchIndex:
    path = tmp_path_factory.mktemp("search") / "index"
    with SearchIndex.create(path, heap_mb=64, threads=2) as w:
        w.add(ROWS[:35])
        w.add(ROWS[35:])
    return SearchIndex.open(path)


# --- ranking -------------------------------------------------------------------------------


def test_or_of_terms_ranks_products_with_every_word_first(index: SearchIndex) -> None:
    got = ids(index.search("wireless earbuds"))
    assert set(got[:2]) == {"101", "102"}
    assert set(got) == {"101", "102", "103", "104", "105", "106", "107"}


def _index_of(tmp_path: Path, rows: list[dict[str, Any]]) -> SearchIndex:
    with SearchIndex.create(tmp_path / "i", heap_mb=32, threads=1) as w:
        w.add(rows)
    return SearchIndex.open(tmp_path / "i")


# Background products: they give "durable" and "food" (3 products each) and "wireless"
# (10 products) an idf, as a catalog would.
_BACKGROUND = [
    row(str(900 + i), f"Phone Case Model {i}" + (" Durable" if i % 10 == 0 else "")
        + (" Food" if i % 10 == 1 else "") + (" Wireless" if i % 3 == 2 else ""))
    for i in range(30)
]


def test_a_product_matching_every_word_outranks_one_matching_one_word_twice(
    tmp_path: Path,
) -> None:
    # "2" holds "food" in its title and again in its brand attribute; "1" holds both query
    # words once. One document per product: the second "food" raises the term frequency
    # to 2, which saturates, instead of scoring a second field in full.
    index = _index_of(tmp_path, [
        row("1", "Durable Lunch Box For Food Storage Kids School",
            attrs={"material": ["plastic"], "capacity": ["1 liter"]}),
        row("2", "Hiraya Foods Banana Chips", sold=900, attrs={"brand": ["hiraya foods"]}),
        *_BACKGROUND,
    ])
    assert ids(index.search("durable food"))[:2] == ["1", "2"]
    # A repeated word counts as often as it is written (Lucene's term frequency)...
    index = _index_of(tmp_path / "b", [
        row("3", "Wireless Wireless Wireless Handheld Mic"), row("4", "Wireless Charger Pad"),
        row("5", "Handheld Mic"), *_BACKGROUND,
    ])
    scores = {h.product_id: h.score for h in index.search("wireless")}
    assert scores["3"] > scores["4"]
    # ...and saturates: three of one word do not beat every word of the query once.
    assert ids(index.search("wireless charger"))[0] == "4"


def test_an_exact_title_match_ranks_first(tmp_path: Path) -> None:
    title = "Stainless Steel Water Bottle 1L"
    index = _index_of(tmp_path, [
        row("1", "Stainless Steel Water Bottle 1L Insulated Sports", sold=500),
        row("2", "Water Bottle", sold=400, attrs={"material": ["stainless steel"],
                                                  "capacity": ["1L"]}),
        # The same words as the exact title, in another order: the same BM25 score.
        row("3", "Bottle 1L Steel Water Stainless", sold=300),
        row("4", title, sold=1),
        row("5", "Steel Water Bottle", sold=200, sku={"0": {"size": "1L"}}),
        *_BACKGROUND,
    ])
    got = index.search(title)
    assert ids(got)[0] == "4"
    assert got[0].score == got[1].score and ids(got)[1] == "3"


def test_ties_at_the_window_cut_are_decided_by_relevance_before_sales(tmp_path: Path) -> None:
    # Every product's contents are "tee" and "cotton" once each: equal scores for "tee".
    # The ones whose title says "tee" are the more relevant, whatever the others sell.
    in_title = [row(str(10 + i), "Tee Cotton", sold=i) for i in range(3)]
    in_attrs = [row(str(20 + i), "Cotton", sold=100 + i, attrs={"style": ["tee"]})
                for i in range(3)]
    index = _index_of(tmp_path, [*in_attrs, *in_title, *_BACKGROUND])
    scores = {h.score for h in index.search("tee")}
    assert len(scores) == 1
    assert ids(index.search("tee", window=2)) == ["12", "11"]
    assert ids(index.search("tee")) == ["12", "11", "10", "22", "21", "20"]
    # Adjacent query words in the title, in the query's order, count next.
    index = _index_of(tmp_path / "b", [
        row("1", "Steel Bottle Water", sold=50), row("2", "Water Bottle Steel", sold=10),
        *_BACKGROUND,
    ])
    got = index.search("water bottle")
    assert got[0].score == got[1].score and ids(got) == ["2", "1"]


def test_stemming_case_and_accents_match(index: SearchIndex) -> None:
    assert set(ids(index.search("EARBUD"))) == EARBUDS
    for q in ("cafe", "CAFÉ", "café latte"):
        assert ids(index.search(q))[0] == "108"


def test_sku_option_and_attribute_values_are_searchable(
    index: SearchIndex, tmp_path: Path
) -> None:
    assert ids(index.search("crimson")) == ["109"]
    assert ids(index.search("bamboo")) == ["110"]
    assert ids(index.search("stride")) == ["109"]
    # ShoppingBench's contents hold the brand only where an attribute holds it.
    only_brand = _index_of(tmp_path, [row("1", "Trail Socks", brand="Zenhaven")])
    assert only_brand.search("zenhaven") == [] and ids(only_brand.search("socks")) == ["1"]


@pytest.mark.parametrize(
    "q",
    ['"wireless earbuds"', "wireless AND (earbuds", "earbuds -wireless", "title:earbuds",
     "price:[0 TO 100] earbuds", "earbuds)))", "+wireless +earbuds^2", "earbuds~2", "earbuds*",
     "earbuds\\", "{earbuds}", "earbuds/wireless", "earbuds 🎧"],
)
def test_query_syntax_is_searched_as_plain_words(index: SearchIndex, q: str) -> None:
    got = ids(index.search(q))
    assert got[0] in EARBUDS
    assert set(got) >= EARBUDS


@pytest.mark.parametrize("q", ["", "   ", "AND (", "!!! ???", "the of and", '""'])
def test_a_query_without_searchable_words_lists_top_sellers(index: SearchIndex, q: str) -> None:
    hits = index.search(q)
    assert len(hits) == 50
    assert ids(hits)[:3] == ["103", "110", "101"]
    assert [h.sold_count for h in hits] == sorted((h.sold_count for h in hits), reverse=True)
    assert all(h.score == 0.0 for h in hits)
    assert ids(index.search(q, shop_id="14")) == ["110", "109", "108"]


def test_terms_in_most_of_a_large_catalog_are_left_out_of_longer_queries(
    index: SearchIndex,
) -> None:
    # "tee" is in 60 of the 70 products; a catalog this small keeps it in every query...
    assert index.ranking.common_min_docs > len(index)
    assert {h.product_id for h in index.search("tee wireless", window=1000)} >= {"200", "101"}
    # ...a large one (here: any size) keeps it only when it is the query's only word.
    large = SearchIndex.open(index.path, ranking=RankingConfig(common_min_docs=0))
    assert set(ids(large.search("tee wireless"))) == {"101", "102", "104", "105", "106", "107"}
    assert len(large.search("tee", window=1000)) == 60


def test_words_in_no_product_find_nothing(index: SearchIndex) -> None:
    assert index.search("zeppelin") == []
    assert index.search("日本語") == []


def test_equal_scores_go_to_the_better_seller_at_every_window_size(index: SearchIndex) -> None:
    by_sold = sorted(TEES, key=lambda r: -r["sold_count"])
    for window in (1, 7, 50):
        hits = index.search("tee", window=window)
        assert ids(hits) == [r["product_id"] for r in by_sold[:window]]


def test_hits_carry_the_product_fields(index: SearchIndex) -> None:
    hit = index.search("sport waterproof")[0]
    assert hit.model_dump(exclude={"score"}) == {
        "product_id": "102", "shop_id": "12", "title": "Sport Wireless Earbuds Waterproof",
        "price": 1499.0, "service": ["official", "COD", "flashsale"], "sold_count": 40,
    }
    assert hit.score > 0


# --- filters -------------------------------------------------------------------------------


def test_shop_filter(index: SearchIndex) -> None:
    assert ids(index.search("wireless earbuds", shop_id="11")) == ["101", "103"]
    assert index.search("wireless earbuds", shop_id="99") == []


def test_price_range_is_inclusive_and_open_ended(index: SearchIndex) -> None:
    assert set(ids(index.search("wireless", price=(350, 650)))) == {"104", "105"}
    assert set(ids(index.search("wireless", price="1200-"))) == {"102", "106", "107"}
    assert set(ids(index.search("wireless", price="-350"))) == {"104"}
    assert set(ids(index.search("earbuds", price=(None, 899.0)))) == {"101", "103"}


def test_every_listed_service_is_required(index: SearchIndex) -> None:
    assert set(ids(index.search("wireless earbuds", service=["official", "COD"]))) == {"101", "102"}
    assert ids(index.search("wireless earbuds", service="flashsale")) == ["102"]
    assert ids(index.search("earbuds", service="COD,official", price="1000-")) == ["102"]


def test_filters_combine(index: SearchIndex) -> None:
    got = index.search("wireless", shop_id="13", price="600-1300", service=["official"])
    assert ids(got) == ["105"]


@pytest.mark.parametrize("window", [1, 2, 5, 50])
@pytest.mark.parametrize(
    "filters",
    [{"price": (110, 130)}, {"price": (100, 159)}, {"service": ["COD"]}, {"shop_id": "21"},
     {"shop_id": "22", "service": ["COD"]}, {"price": (None, 120), "service": ["COD"]}],
)
def test_filtered_window_is_the_filtered_subsequence_of_the_full_ranking(
    index: SearchIndex, window: int, filters: dict[str, Any]
) -> None:
    # Small windows send some of these through post-filtering and its fallback to the
    # engine's filter; every path must give exactly the filtered full ranking's head.
    everything = index.search("plain tee", window=1000)
    lo, hi = filters.get("price", (None, None))
    want = [
        h.product_id for h in everything
        if (lo is None or h.price >= lo) and (hi is None or h.price <= hi)
        and set(filters.get("service", ())) <= set(h.service)
        and filters.get("shop_id", h.shop_id) == h.shop_id
    ][:window]
    assert want
    assert ids(index.search("plain tee", window=window, **filters)) == want


@pytest.fixture(scope="module")
def ladder(tmp_path_factory: pytest.TempPathFactory) -> SearchIndex:
    """40 products whose titles grow by one word each: every score for "tee" differs."""
    path = tmp_path_factory.mktemp("ladder") / "index"
    with SearchIndex.create(path, heap_mb=32, threads=1) as w:
        w.add([row(str(500 + i), " ".join(["Tee"] + [f"w{j}" for j in range(i)]),
                   price=float(i), service=("COD",) if i % 2 == 0 else ()) for i in range(40)])
    return SearchIndex.open(path)


@pytest.mark.parametrize(
    ("filters", "want", "engine_ranked", "max_fetch"),
    [({"price": "-10"}, ["500", "501", "502"], 0, 4000),  # the top hits pass: post-filtered
     ({"price": "30-"}, ["530", "531", "532"], 1, 4000),  # none of them pass: the engine's
     ({"price": "5-"}, ["505", "506", "507"], 0, 4000),  # 1 of 6 passes: fetch 36, enough
     ({"price": "5-"}, ["505", "506", "507"], 1, 20),  # ...unless 36 is too many
     ({"service": ["COD"]}, ["500", "502", "504"], 0, 4000),
     ({"service": ["COD"], "price": "20-"}, ["520", "522", "524"], 1, 4000),
     ({"shop_id": "1"}, ["500", "501", "502"], 1, 4000)],  # a shop always goes to the engine
)
def test_post_filtering_falls_back_to_the_engine_when_too_few_pass(
    ladder: SearchIndex, filters: dict[str, Any], want: list[str], engine_ranked: int,
    max_fetch: int,
) -> None:
    # Post-filtering looks at the top 6 first (2 per place of a 3-wide window).
    tuned = RankingConfig(tie_fetch=4, post_filter_factor=2, max_post_fetch=max_fetch)
    index = SearchIndex.open(ladder.path, ranking=tuned)
    assert ids(index.search("tee", window=3, **filters)) == want
    assert index.stats() == RankingStats(
        post_filtered=1 - engine_ranked, engine_ranked=engine_ranked
    )


def test_stats_count_text_searches_by_the_way_their_window_was_computed(
    tmp_path: Path,
) -> None:
    with SearchIndex.create(tmp_path / "i", heap_mb=32, threads=1) as w:
        w.add(ROWS)
    index = SearchIndex.open(tmp_path / "i")
    assert index.ranking == RankingConfig() and index.stats() == RankingStats(
        post_filtered=0, engine_ranked=0
    )
    index.search("tee")  # no filter: the engine ranks it
    index.search("tee", price="-130")  # enough of the top hits pass
    index.search("tee", shop_id="20")  # a shop goes to the engine
    index.search("", price="-130")  # no text: top sellers, not a ranked window
    assert index.stats() == RankingStats(post_filtered=1, engine_ranked=2)


@pytest.mark.parametrize(
    "bad",
    [{"tie_fetch": 0}, {"post_filter_factor": 0}, {"max_post_fetch": 0}, {"common_share": 0.0},
     {"common_share": 1.5}, {"common_min_docs": -1}, {"tie_fetches": 400}],
)
def test_ranking_config_refuses_values_that_cannot_rank(bad: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match=next(iter(bad))):
        RankingConfig(**bad)


# --- sorts and pages -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sort", "key"),
    [("priceasc", lambda h: h.price), ("pricedesc", lambda h: -h.price),
     ("order", lambda h: -h.sold_count)],
)
def test_sorts_reorder_the_same_window(index: SearchIndex, sort: str, key: Any) -> None:
    default = index.search("wireless earbuds charger")
    hits = index.search("wireless earbuds charger", sort=sort)
    assert set(ids(hits)) == set(ids(default))
    assert [key(h) for h in hits] == sorted(key(h) for h in hits)
    # Equal keys keep their BM25 order.
    for a, b in zip(hits, hits[1:], strict=False):
        if key(a) == key(b):
            assert ids(default).index(a.product_id) < ids(default).index(b.product_id)


def test_sort_applies_within_the_top_50_only(index: SearchIndex) -> None:
    cheapest = index.search("tee", sort="priceasc")
    assert len(cheapest) == 50
    excluded = {r["product_id"] for r in TEES} - set(ids(cheapest))
    # The 10 worst sellers fell out of the window even though some are the cheapest.
    assert {r["sold_count"] for r in TEES if r["product_id"] in excluded} == set(range(10))


def test_pages_split_the_window_ten_by_ten(index: SearchIndex) -> None:
    window = ids(index.search("tee"))
    pages = [ids(index.find("tee", page)) for page in range(1, 6)]
    assert [len(p) for p in pages] == [10] * 5
    assert sum(pages, []) == window
    assert ids(index.find("wireless earbuds", 1)) == ids(index.search("wireless earbuds"))
    assert index.find("wireless earbuds", 2) == []
    sorted_pages = [ids(index.find("tee", p, sort="pricedesc")) for p in range(1, 6)]
    assert sum(sorted_pages, []) == ids(index.search("tee", sort="pricedesc"))


# --- fetch by id ---------------------------------------------------------------------------


def test_get_returns_products_in_order_with_none_for_unknown(index: SearchIndex) -> None:
    got = index.get(["109", "999", "101", "abc", "109", ""])
    assert got[0] == Product.model_validate(GADGETS[8])
    assert got[2] == Product.model_validate(GADGETS[0])
    assert got[4] == got[0]
    assert got[1] is None and got[3] is None and got[5] is None
    assert index.get([]) == []
    assert len(index) == len(ROWS)


# --- rejections ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "want"),
    [("0-500", (0.0, 500.0)), ("500-", (500.0, None)), ("-500", (None, 500.0)),
     (" 9.99 - 19.5 ", (9.99, 19.5)), ("100-100", (100.0, 100.0))],
)
def test_parse_price(text: str, want: tuple[float | None, float | None]) -> None:
    assert parse_price(text) == want


@pytest.mark.parametrize("text", ["cheap", "500", "-", "", "1e3-2e3", "-5-10", "10-5", "a-b",
                                  "100-200-300", "nan-", "0x10-"])
def test_parse_price_rejects_garbage_naming_value_and_form(text: str) -> None:
    with pytest.raises(SearchError, match="price") as e:
        parse_price(text)
    assert repr(text) in str(e.value) or "empty" in str(e.value)


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [({"sort": "relevance"}, "sort 'relevance' is not one of default, priceasc, pricedesc, order"),
     ({"service": ["cod"]}, "service 'cod' is not one of official, freeShipping, COD, flashsale"),
     ({"price": (-1, 5)}, "price low bound -1"),
     ({"price": (5, float("inf"))}, "price high bound inf"),
     ({"price": "0-500pesos"}, "price '0-500pesos' is not a price range"),
     ({"shop_id": "shop-1"}, "shop_id 'shop-1' is not a shop id"),
     ({"window": 0}, "window 0")],
)
def test_invalid_arguments_raise_search_error(
    index: SearchIndex, kwargs: dict[str, Any], pattern: str
) -> None:
    with pytest.raises(SearchError) as e:
        index.search("earbuds", **kwargs)
    assert pattern in str(e.value)


@pytest.mark.parametrize("page", [0, 6, -1])
def test_pages_outside_one_to_five_are_rejected(index: SearchIndex, page: int) -> None:
    with pytest.raises(SearchError, match=f"page {page} is out of range; pages are 1 to 5"):
        index.find("earbuds", page)


def test_open_errors_name_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(CatalogError, match=f"{missing}: search index directory does not exist"):
        SearchIndex.open(missing)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CatalogError, match=f"{empty}: not a shopbench search index"):
        SearchIndex.open(empty)
    (empty / MARKER).write_text(json.dumps({"index_format": 999}))
    with pytest.raises(CatalogError, match=f"search index format 999, this shopbench reads {FMT}"):
        SearchIndex.open(empty)
    (empty / MARKER).write_text(json.dumps({"index_format": FMT}))
    with pytest.raises(CatalogError, match=f"{empty}: cannot open search index"):
        SearchIndex.open(empty)


def test_open_refuses_an_index_whose_parts_disagree(tmp_path: Path) -> None:
    from shopbench.catalog.search.hit_table import HITS_FILE

    with SearchIndex.create(tmp_path / "i", heap_mb=32, threads=1) as w:
        w.add(GADGETS)
    marker = tmp_path / "i" / MARKER
    marker.write_text(json.dumps({"index_format": FMT, "products": 11}))
    with pytest.raises(CatalogError, match="inconsistent \\(10 documents, 10 hit rows, 11 prod"):
        SearchIndex.open(tmp_path / "i")
    (tmp_path / "i" / HITS_FILE).write_bytes(b"junk")
    with pytest.raises(CatalogError, match=f"{tmp_path / 'i' / HITS_FILE}: unreadable hit table"):
        SearchIndex.open(tmp_path / "i")


def test_create_refuses_non_empty_directories_and_tiny_heaps(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(CatalogError, match="not an empty directory"):
        SearchIndex.create(tmp_path)
    with pytest.raises(CatalogError, match="heap of 20 MB is too small for 2 threads"):
        SearchIndex.create(tmp_path / "i", heap_mb=20, threads=2)


def test_bad_rows_are_rejected_naming_the_product(tmp_path: Path) -> None:
    bad = dict(GADGETS[0], price=-3.0)
    with pytest.raises(CatalogError, match="product '101': invalid row \\(price"), \
            SearchIndex.create(tmp_path / "a", heap_mb=32, threads=1) as w:
        w.add([bad])
    missing = {k: v for k, v in GADGETS[1].items() if k != "title"}
    with pytest.raises(CatalogError, match="product '102': row fields differ.*'title'"), \
            SearchIndex.create(tmp_path / "b", heap_mb=32, threads=1) as w:
        w.add([GADGETS[0], missing])
    # A failed build leaves nothing that opens as an index.
    with pytest.raises(CatalogError):
        SearchIndex.open(tmp_path / "b")


# --- builds, threads -----------------------------------------------------------------------


def test_results_do_not_depend_on_segment_layout(index: SearchIndex, tmp_path: Path) -> None:
    # Same rows in the same order, but one indexing thread and a commit per 7 rows: a
    # different set of segments, the same answers.
    with SearchIndex.create(tmp_path / "i", heap_mb=32, threads=1) as w:
        for i in range(0, len(ROWS), 7):
            w.add(ROWS[i : i + 7])
            w.commit()
    other = SearchIndex.open(tmp_path / "i")
    for q, kw in [("tee", {}), ("plain tee shirt", {"price": (None, 130)}), ("", {}),
                  ("wireless earbuds", {"sort": "order"}), ("tee", {"window": 3})]:
        assert index.search(q, **kw) == other.search(q, **kw)


def test_threads_sharing_one_index_get_the_same_answers(index: SearchIndex) -> None:
    queries = ["wireless earbuds", "tee", "cafe", "", "crimson shoes"] * 20
    want = [index.search(q, price="0-2000") for q in queries]
    got: dict[int, list[Any]] = {}

    def work(k: int) -> None:
        got[k] = [index.search(q, price="0-2000") for q in queries]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(got[k] == want for k in range(3))


# --- CLI -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def catalog_with_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A catalog directory laid out as the catalog builder writes it, over ROWS."""
    from shopbench.catalog.layout import CatalogManifest, write_manifest
    from shopbench.catalog.parquet import write_products

    d = tmp_path_factory.mktemp("cat") / "c"
    (d / "products").mkdir(parents=True)
    write_products(d / "products" / "part-00000.parquet", ROWS)
    with SearchIndex.create(d / "index", heap_mb=32, threads=1) as w:
        w.add(ROWS)
    write_manifest(d, CatalogManifest(
        format_version=1, shopbench_version="test", kind="imported", n_products=len(ROWS),
        n_shops=10, n_categories=1, product_files=["products/part-00000.parquet"],
    ))
    return d


def _cli() -> typer.Typer:
    from shopbench.commands import search

    app, bench_app = typer.Typer(), typer.Typer()
    app.add_typer(bench_app, name="bench")
    search.register(app, bench_app)
    return app


def test_cli_search_prints_a_table_of_hits(catalog_with_index: Path) -> None:
    res = CliRunner().invoke(
        _cli(), ["search", str(catalog_with_index), "wireless earbuds", "--service", "COD",
                 "--price", "0-1000", "--sort", "priceasc"],
        env={"COLUMNS": "200"},
    )
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.output.splitlines() if "Earbuds" in ln]
    assert ["103" in lines[0], "101" in lines[1]] == [True, True]
    assert "102" not in res.output


def test_cli_search_json_and_pages(catalog_with_index: Path) -> None:
    res = CliRunner().invoke(_cli(), ["search", str(catalog_with_index), "tee", "--page", "5",
                                      "--json"])
    assert res.exit_code == 0, res.output
    assert len(json.loads(res.output)) == 10


@pytest.mark.parametrize(
    ("args", "error"),
    [(["--page", "9"], SearchError), (["--sort", "cheapest"], SearchError),
     (["--price", "cheap"], SearchError)],
)
def test_cli_search_rejections_are_shopbench_errors(
    catalog_with_index: Path, args: list[str], error: type[Exception]
) -> None:
    res = CliRunner().invoke(_cli(), ["search", str(catalog_with_index), "tee", *args])
    assert isinstance(res.exception, error)


def test_cli_search_on_a_non_catalog_names_it(tmp_path: Path) -> None:
    res = CliRunner().invoke(_cli(), ["search", str(tmp_path), "tee"])
    assert isinstance(res.exception, CatalogError)
    assert str(tmp_path) in str(res.exception)


def test_bench_search_prints_one_json_object(catalog_with_index: Path) -> None:
    res = CliRunner().invoke(
        _cli(), ["bench", "search", "--catalog", str(catalog_with_index), "--queries", "20",
                 "--threads", "2", "--seed", "3", "--json"],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert {"products", "p50_ms", "p99_ms", "filtered_p50_ms", "qps", "qps_threads",
            "open_s"} <= set(out)
    assert out["products"] == len(ROWS)
    assert out["queries"] == 20
    assert out["p50_ms"] <= out["p99_ms"]
    assert out["qps"] > 0 and out["qps_threads"] > 0


def test_bench_queries_are_drawn_from_the_catalog_by_seed(catalog_with_index: Path) -> None:
    from shopbench.bench.search import make_queries, sample_products

    a = make_queries(sample_products(catalog_with_index, 30, seed=5), seed=5)
    b = make_queries(sample_products(catalog_with_index, 30, seed=5), seed=5)
    c = make_queries(sample_products(catalog_with_index, 30, seed=6), seed=6)
    assert a == b and a != c
    assert sum(q.filtered for q in a) >= 10
    assert all(1 <= len(q.q.split()) <= 5 for q in a)


# --- on a generated catalog ----------------------------------------------------------------


def test_generated_products_are_found_by_their_title(request: pytest.FixtureRequest) -> None:
    pytest.importorskip("shopbench.catalog.generator")
    import random

    catalog = request.getfixturevalue("catalog")
    rng = random.Random(0)
    products = [p for batch in catalog.iter_products() for p in batch]
    for p in rng.sample(products, 20):
        assert p.product_id in ids(catalog.index.search(p.title)), p.title
        assert p.product_id in ids(catalog.index.find(p.title, shop_id=p.shop_id)), p.title
        assert catalog.index.get([p.product_id]) == [p]
