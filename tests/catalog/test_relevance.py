"""The relevance bench's pure parts: ShoppingBench's documents, its filters and sorts, and
the measures (overlap, all words, ties). The bench itself needs Java and Pyserini and never
runs here."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from shopbench.bench.lucene_docs import DOCS_FILE, contents_of, document_of, write_collection
from shopbench.bench.lucene_search import passes, sort_window
from shopbench.bench.relevance_measures import has_all_words, jaccard, tie_at_cut
from shopbench.catalog.layout import read_manifest
from shopbench.cli import main

PRODUCT = {
    "product_id": "101", "shop_id": "7", "brand": "Hiraya Foods", "title": "Durable Food Box",
    "price": 250.0, "sold_count": 3, "service": ["COD"],
    "sku_options": {"0": {"color": "red", "size": "m"}, "1": {"color": "blue", "size": "m"}},
    "attributes": {"material": ["plastic", "bpa free"], "finish": ["plastic"]},
}


def test_contents_are_title_sku_values_and_attribute_values_each_once() -> None:
    # As ShoppingBench's convert_products_to_documents.py: three lines, no brand of its own.
    assert contents_of(PRODUCT) == "Durable Food Box\nred m blue\nplastic bpa free"
    doc = document_of(PRODUCT)
    assert doc["id"] == "101" and doc["contents"] == contents_of(PRODUCT)
    assert doc["product"] == PRODUCT


def test_contents_of_a_product_without_options_or_attributes_keeps_empty_lines() -> None:
    bare = {**PRODUCT, "sku_options": {}, "attributes": {}}
    assert contents_of(bare) == "Durable Food Box\n\n"


def test_the_collection_holds_every_product_once_with_its_filter_fields(
    catalog_dir: Path, tmp_path: Path
) -> None:
    n = write_collection(catalog_dir, tmp_path / "collection")
    lines = (tmp_path / "collection" / DOCS_FILE).read_text().splitlines()
    assert n == len(lines) == read_manifest(catalog_dir).n_products == 2000
    docs = [json.loads(line) for line in lines]
    assert len({d["id"] for d in docs}) == n
    first_file = catalog_dir / read_manifest(catalog_dir).product_files[0]
    row = pq.read_table(first_file).slice(0, 1).to_pylist()[0]
    first = docs[0]
    assert first["id"] == row["product_id"]
    assert first["contents"].split("\n")[0] == row["title"]
    for key in ("shop_id", "price", "service", "sold_count"):
        assert first["product"][key] == row[key]
    assert first["product"]["attributes"] == json.loads(row["attributes"])
    assert "base_id" not in first["product"]


def test_shoppingbench_filters_are_inclusive_and_require_every_service() -> None:
    p = {"shop_id": "7", "price": 250.0, "service": ["COD", "official"]}
    assert passes(p, None, None, [])
    assert passes(p, "7", [250.0, 250.0], ["official", "COD"])
    assert passes(p, "", [None, 300.0], [])  # an empty shop id filters nothing
    assert not passes(p, "8", None, [])
    assert not passes(p, None, [251.0, None], [])
    assert not passes(p, None, [None, 249.0], [])
    assert not passes(p, None, None, ["COD", "flashsale"])


def test_shoppingbench_sorts_keep_relevance_order_among_equal_keys() -> None:
    window = [{"product_id": str(i), "price": price, "sold_count": sold}
              for i, (price, sold) in enumerate([(5.0, 1), (3.0, 9), (5.0, 9), (1.0, 1)])]
    ids = lambda: [p["product_id"] for p in window]  # noqa: E731
    sort_window(window, None)
    assert ids() == ["0", "1", "2", "3"]
    sort_window(window, "order")
    assert ids() == ["1", "2", "0", "3"]
    sort_window(window, "priceasc")
    assert ids() == ["3", "1", "2", "0"]
    sort_window(window, "pricedesc")
    assert ids() == ["2", "0", "1", "3"]


def test_jaccard_of_page_ids() -> None:
    assert jaccard(["a", "b"], ["b", "a"]) == 1.0
    assert jaccard(["a", "b", "c", "d"], ["c", "d", "e", "f"]) == pytest.approx(2 / 6)
    assert jaccard(["a"], ["b"]) == 0.0
    assert jaccard([], ["b"]) == 0.0
    assert jaccard([], []) == 1.0


def test_a_hit_has_all_words_only_when_every_query_term_is_in_it() -> None:
    contents = {"durabl", "food", "box"}
    assert has_all_words(["durabl", "food"], contents)
    assert not has_all_words(["durabl", "food", "contain"], contents)
    assert has_all_words([], contents)


def test_ties_at_the_tenth_hit() -> None:
    distinct = [10.0 - i for i in range(11)]
    assert tie_at_cut(distinct) is False
    assert tie_at_cut(distinct[:10]) is None  # no 11th hit competes for the page
    tantivy_tie = distinct[:9] + [1.5, 1.5]
    assert tie_at_cut(tantivy_tie) is True
    assert tie_at_cut(tantivy_tie, epsilon=0.0) is True
    # Anserini's tie adjustment: a 4-decimal tie broken by id, 1e-6 apart.
    anserini = distinct[:9] + [4.1826, 4.182599]
    assert tie_at_cut(anserini) is True
    assert tie_at_cut(anserini, epsilon=0.0) is False
    assert tie_at_cut(distinct[:9] + [3.9532, 3.9531]) is False


def test_bench_relevance_without_the_lucene_environment_says_how_to_make_it(
    catalog_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-venv" / "bin" / "python"
    args = ["bench", "relevance", "--catalog", str(catalog_dir), "--queries", "10",
            "--lucene-python", str(missing), "--work", str(tmp_path / "work")]
    with pytest.raises(SystemExit) as exit_:
        main(args)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert str(missing) in err and "scripts/lucene_env.sh" in err
    assert not (tmp_path / "work" / "index").exists()
