"""The synthetic catalog generator: shape, realism and determinism of its rows."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import statistics
import subprocess
import sys
from collections import Counter, defaultdict

import numpy as np
import pytest
from pydantic import ValidationError

from shopbench.catalog.errors import GeneratorError
from shopbench.catalog.gen_ids import KeyedPermutation, product_ids
from shopbench.catalog.gen_world import build_brand_world, build_shops, n_shops_for, price_round
from shopbench.catalog.generator import GeneratorConfig, generate_chunk, generate_products, n_chunks
from shopbench.catalog.knowledge import generate_knowledge
from shopbench.catalog.schema import SERVICES, Product
from shopbench.catalog.taxonomy import load_taxonomy

N = 5000
CFG = GeneratorConfig(seed=7, n_products=N, chunk_size=2000)
TEXT_FIELDS = ("title", "short_description", "description", "specification")


@pytest.fixture(scope="module")
def chunks() -> list[list[dict]]:
    return list(generate_products(CFG))


@pytest.fixture(scope="module")
def rows(chunks: list[list[dict]]) -> list[dict]:
    return [r for c in chunks for r in c]


def test_taxonomy_is_a_real_category_tree() -> None:
    tax = load_taxonomy()
    assert len(tax.tops) >= 15
    assert len(tax.leaves) >= 150
    assert len({leaf.name for leaf in tax.leaves}) == len(tax.leaves)
    for leaf in tax.leaves:
        assert re.fullmatch(r"[^>]+ > [^>]+ > [^>]+", leaf.path)
        assert 5 <= len(leaf.brands) <= 20
        assert leaf.sku and leaf.nouns
        assert all(re.fullmatch(r"[a-z0-9_&(),\-]+", a.split("@")[0]) for a in leaf.attrs)


def test_chunks_partition_the_catalog(chunks: list[list[dict]]) -> None:
    assert n_chunks(CFG) == 3
    assert [len(c) for c in chunks] == [2000, 2000, 1000]


def test_every_row_is_a_valid_product_with_exactly_its_fields(rows: list[dict]) -> None:
    fields = set(Product.model_fields)
    for r in rows:
        assert set(r) == fields
        Product.model_validate(r)


def test_ids_are_unique_well_formed_and_not_in_generation_order(rows: list[dict]) -> None:
    pids = [r["product_id"] for r in rows]
    assert len(set(pids)) == len(pids)
    assert all(re.fullmatch(r"[1-9][0-9]{9}", p) for p in pids)
    assert all(re.fullmatch(r"[1-9][0-9]{7,8}", r["shop_id"]) for r in rows)
    # sequential ids would rise at every step; a keyed permutation rises about half the time
    rises = sum(int(a) < int(b) for a, b in zip(pids, pids[1:], strict=False)) / (len(pids) - 1)
    assert 0.4 < rises < 0.6


def test_keyed_permutation_is_a_bijection_and_batch_matches_scalar() -> None:
    perm = KeyedPermutation(key=11, domain=1000)
    assert sorted(perm(i) for i in range(1000)) == list(range(1000))
    ids = product_ids(7)
    batch = ids.many(np.arange(0, 3000, dtype=np.uint64)).tolist()
    assert batch == [ids(i) for i in range(3000)]
    with pytest.raises(ValueError, match="outside permutation domain"):
        perm(1000)


def test_every_leaf_is_populated_in_proportion(rows: list[dict]) -> None:
    tax = load_taxonomy()
    weights = build_brand_world(CFG.seed).leaf_weights
    # at 2.5M products a leaf needs 2,000+: its share must be at least 0.08%
    assert min(weights) / sum(weights) >= 2000 / 2_500_000
    counts = Counter(r["category"] for r in rows)
    assert set(counts) <= {leaf.path for leaf in tax.leaves}
    assert len(counts) >= 0.95 * len(tax.leaves)
    expected = [w / sum(weights) for w in weights]
    observed = [counts[leaf.path] / len(rows) for leaf in tax.leaves]
    assert statistics.correlation(expected, observed) > 0.7


def test_shops_sell_several_related_items(rows: list[dict]) -> None:
    by_shop: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_shop[r["shop_id"]].append(r)
    assert len(by_shop) == n_shops_for(N) == 50
    assert sum(len(v) >= 3 for v in by_shop.values()) >= 0.8 * len(by_shop)
    for items in by_shop.values():
        tops = Counter(r["category"].split(" > ")[0] for r in items)
        assert tops.most_common(1)[0][1] >= 0.9 * len(items)
        assert len({r["category"] for r in items}) >= 2
        # official (LazMall) is a property of the shop, not of a listing
        assert len({"official" in r["service"] for r in items}) == 1


def test_shop_count_scales_with_catalog_size() -> None:
    assert n_shops_for(10) == 50
    assert n_shops_for(2_500_000) == 12_500
    world = build_shops(3, 400)
    assert len({s.shop_id for s in world.shops}) == 400
    assert all(len(sellers) >= 3 for sellers in world.sellers)


def test_base_products_are_listed_by_several_shops(rows: list[dict]) -> None:
    bases: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        bases[r["base_id"]].append(r)
    multi = [v for v in bases.values() if len(v) >= 2]
    assert len(multi) >= 0.3 * len(bases)
    for listings in multi:
        assert len({r["shop_id"] for r in listings}) == len(listings)
        for key in ("category", "brand", "description", "attributes", "sku_options"):
            assert len({repr(r[key]) for r in listings}) == 1
    assert sum(len({r["title"] for r in v}) > 1 for v in multi) >= 0.8 * len(multi)
    assert sum(len({r["price"] for r in v}) > 1 for v in multi) >= 0.7 * len(multi)


def test_prices_are_positive_and_follow_leaf_medians(rows: list[dict]) -> None:
    tax = load_taxonomy()
    assert all(r["price"] > 0 for r in rows)
    by_leaf: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        by_leaf[r["category"]].append(r["price"])
    sized = [leaf for leaf in tax.leaves if len(by_leaf[leaf.path]) >= 15]
    assert len(sized) >= 100
    med = {leaf.name: statistics.median(by_leaf[leaf.path]) for leaf in sized}
    xs = [math.log(leaf.price) for leaf in sized]
    ys = [math.log(med[leaf.name]) for leaf in sized]
    assert statistics.correlation(xs, ys) > 0.9
    # a laptop-like leaf costs far more than a phone-case-like one, every time
    for a in sized:
        for b in sized:
            if a.price >= 10 * b.price:
                assert med[a.name] > 3 * med[b.name], (a.name, b.name)


def test_price_round_looks_like_a_marketplace_price() -> None:
    assert price_round(0.2) == 1.0
    assert price_round(57.4) == 57.0
    assert price_round(342.0) == 349.0
    assert str(int(price_round(18_321.0))).endswith("99") or str(
        int(price_round(18_321.0))
    ).endswith("49")


def test_sold_counts_are_heavy_tailed(rows: list[dict]) -> None:
    sold = sorted(r["sold_count"] for r in rows)
    median = statistics.median(sold)
    assert median <= 10
    assert sold[-1] >= 100 * max(median, 1)
    assert 0.05 < sold.count(0) / len(sold) < 0.6


def test_services_are_valid_and_realistic(rows: list[dict]) -> None:
    share = Counter(s for r in rows for s in r["service"])
    assert all(set(r["service"]) <= set(SERVICES) for r in rows)
    assert all(r["service"] == [s for s in SERVICES if s in r["service"]] for r in rows)
    n = len(rows)
    assert 0.02 < share["flashsale"] / n < 0.12
    assert share["flashsale"] < share["official"] < share["COD"]
    assert 0.2 < share["freeShipping"] / n < 0.8


def test_sku_options_and_attributes_have_shoppingbench_shape(rows: list[dict]) -> None:
    for r in rows:
        opts = r["sku_options"]
        assert 1 <= len(opts) <= 8
        assert list(opts) == [str(i) for i in range(len(opts))]
        assert len({tuple(sorted(o.items())) for o in opts.values()}) == len(opts)
        assert r["attributes"]["brand"] == [r["brand"].lower()]
        assert all(isinstance(v, list) and v for v in r["attributes"].values())
    sizes = [o["size"] for r in rows for o in r["sku_options"].values() if "size" in o]
    assert "int:m" in sizes and "eu:40" in sizes


def test_titles_carry_brand_attributes_and_marketplace_noise(rows: list[dict]) -> None:
    tax = load_taxonomy()
    noise = set(tax.words.title_prefixes) | set(tax.words.title_suffixes)
    n = len(rows)
    assert sum(r["brand"] in r["title"] for r in rows) >= 0.75 * n
    noisy = sum(any(w in r["title"] for w in noise) for r in rows)
    assert 0.2 * n < noisy < 0.8 * n
    assert sum(any(p in r["title"] for p in tax.words.pack_words) for r in rows) > 0.05 * n
    # a leaf's own attribute values often name the product
    jeans = [r for r in rows if r["category"].endswith("> Jeans")]
    with_fit = [r for r in jeans if r["attributes"]["jeans_fit_type"][0] in r["title"].lower()]
    assert len(with_fit) >= 0.3 * len(jeans)


def test_specification_lists_the_attributes(rows: list[dict]) -> None:
    for r in rows[:500]:
        spec = dict(line.split(": ", 1) for line in r["specification"].splitlines())
        assert spec["brand"] == r["brand"]
        for key, values in r["attributes"].items():
            if key != "brand":
                assert spec[key] == ", ".join(values)


def test_mean_text_is_at_most_1_5_kb(rows: list[dict]) -> None:
    sizes = [sum(len(r[f].encode()) for f in TEXT_FIELDS) for r in rows]
    assert statistics.mean(sizes) <= 1536


def test_same_seed_gives_identical_rows(chunks: list[list[dict]]) -> None:
    assert list(generate_products(CFG)) == chunks


def test_generate_chunk_equals_the_streamed_chunk(chunks: list[list[dict]]) -> None:
    # generated last-first, as a worker pool might, and after other seeds filled the caches
    list(generate_products(GeneratorConfig(seed=99, n_products=300)))
    for k in reversed(range(n_chunks(CFG))):
        assert generate_chunk(CFG, k) == chunks[k]


def test_different_seeds_give_different_catalogs(rows: list[dict]) -> None:
    other = [r for c in generate_products(CFG.model_copy(update={"seed": 8})) for r in c]
    assert len({r["product_id"] for r in rows} & {r["product_id"] for r in other}) < 5
    assert len({r["shop_id"] for r in rows} & {r["shop_id"] for r in other}) < 5
    assert len({r["title"] for r in rows} & {r["title"] for r in other}) < 0.1 * N
    assert [r["price"] for r in rows[:200]] != [r["price"] for r in other[:200]]


def test_catalog_size_changes_shops_not_the_world() -> None:
    small = generate_chunk(GeneratorConfig(seed=7, n_products=1000), 0)
    large = generate_chunk(GeneratorConfig(seed=7, n_products=30_000, chunk_size=1000), 0)
    # a brand's home city and founding year belong to the seed's world, whatever the size
    brands = build_brand_world(7).brands
    for r in small + large:
        assert brands[r["brand"]].sentence in r["description"]
    # the number of shops follows the catalog size
    assert len({r["shop_id"] for r in small}) <= 50 < len({r["shop_id"] for r in large})


def test_out_of_range_chunk_and_bad_config_are_rejected() -> None:
    with pytest.raises(GeneratorError, match=r"chunk index 3 out of range: .* chunks 0-2"):
        generate_chunk(CFG, 3)
    with pytest.raises(GeneratorError, match="chunk index -1"):
        generate_chunk(CFG, -1)
    with pytest.raises(ValidationError, match="n_products"):
        GeneratorConfig(seed=1, n_products=0)
    with pytest.raises(ValidationError, match="extra"):
        GeneratorConfig(seed=1, n_products=10, shops=3)  # type: ignore[call-arg]


_DIGEST = """
import hashlib, json
from shopbench.catalog.generator import GeneratorConfig, generate_chunk
from shopbench.catalog.knowledge import generate_knowledge
cfg = GeneratorConfig(seed=5, n_products=600, chunk_size=300)
rows = generate_chunk(cfg, 1)
pages = [p.model_dump() for p in generate_knowledge(cfg)]
print(hashlib.sha256(json.dumps([rows, pages], sort_keys=True).encode()).hexdigest())
"""


def test_output_is_identical_across_processes() -> None:
    # Python randomises str hashing per process; nothing generated may depend on it
    cfg = GeneratorConfig(seed=5, n_products=600, chunk_size=300)
    pages = [p.model_dump() for p in generate_knowledge(cfg)]
    here = json.dumps([generate_chunk(cfg, 1), pages], sort_keys=True).encode()
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", _DIGEST], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == hashlib.sha256(here).hexdigest()
