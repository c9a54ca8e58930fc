"""The seeded synthetic marketplace: rows with `Product`'s fields, chunk by chunk.

A catalog is a list of chunks. Chunk k depends only on (seed, k, n_products, chunk_size):
its random streams come from a hash of (seed, k), the brand world from the seed alone and
the shops from (seed, number of shops); so chunks can be generated in separate processes
and concatenated, and the same configuration always gives the same rows.

Inside a chunk, products come in base products: one leaf × brand item (optionally of a
product line) listed by several shops that sell that leaf, each at its own price, with its
own title noise, sales count and services. Every product line of the seed opens one chunk
with a base product of its own (line j in chunk j mod n_chunks), so that every line, and so
every fact of the knowledge corpus, is on sale even in a small catalog.

Ids: product i gets 1000000000 + perm(i), shop s 10000000 + perm(s), and the j-th base
product of the chunk starting at product `start` perm(start + j) (a chunk has fewer base
products than products, so these never collide); each permutation is keyed by the seed, so
ids reveal neither generation order nor anything that another seed would share.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Iterator

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from shopbench.catalog.errors import GeneratorError
from shopbench.catalog.gen_ids import (
    PRODUCT_ID_BASE,
    PRODUCT_ID_DOMAIN,
    base_ids,
    derive_seed,
    product_ids,
)
from shopbench.catalog.gen_world import (
    BrandWorld,
    ProductLine,
    ShopWorld,
    build_brand_world,
    build_shops,
    n_shops_for,
    price_round,
)
from shopbench.catalog.taxonomy import load_taxonomy
from shopbench.catalog.text import (
    compile_leaves,
    draw_base,
    listing_short_description,
    listing_title,
)

GENERATOR_VERSION = "1.0"

LINE_SHARE = 0.5  # in a group that runs lines, share of base products that belong to one
FLASHSALE_RATE = 0.06
LISTING_PRICE_SIGMA = 0.08
# how many shops list one base product: mostly one to three, sometimes many
LISTINGS = (1, 2, 3, 4, 5, 6, 8, 10)
LISTING_CUM = tuple(np.cumsum((0.34, 0.24, 0.16, 0.1, 0.07, 0.04, 0.03, 0.02)).tolist())
MAX_CHUNK_SIZE = 1_000_000  # rows of one chunk are held in memory at once


class GeneratorConfig(BaseModel):
    """What decides a generated catalog: the secret seed, its size and its chunking."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seed: int = Field(description="the secret catalog seed; publish only its hash while live")
    n_products: int = Field(
        ge=1, le=PRODUCT_ID_DOMAIN, description="number of products in the catalog"
    )
    chunk_size: int = Field(
        default=50_000,
        ge=1,
        le=MAX_CHUNK_SIZE,
        description="products per chunk (the unit of parallel generation)",
    )


def n_chunks(cfg: GeneratorConfig) -> int:
    """How many chunks the catalog has (the last one may be short)."""
    return math.ceil(cfg.n_products / cfg.chunk_size)


def generate_products(cfg: GeneratorConfig) -> Iterator[list[dict]]:
    """Yield the catalog chunk by chunk; each row is a dict with exactly Product's fields."""
    for k in range(n_chunks(cfg)):
        yield generate_chunk(cfg, k)


def generate_chunk(cfg: GeneratorConfig, index: int) -> list[dict]:
    """Chunk `index` alone, identical to the chunk generate_products yields at that position.

    Rows of one base product share their `sku_options` and `attributes` dicts: treat rows as
    read-only. Raises GeneratorError when index is not in [0, n_chunks(cfg)).
    """
    total = n_chunks(cfg)
    if not 0 <= index < total:
        raise GeneratorError(
            f"chunk index {index} out of range: this catalog has chunks 0-{total - 1}"
        )
    start = index * cfg.chunk_size
    end = min(cfg.n_products, start + cfg.chunk_size)
    world = build_brand_world(cfg.seed)
    shops = build_shops(cfg.seed, n_shops_for(cfg.n_products))
    return _Chunk(cfg, index, start, end, world, shops).rows()


class _Chunk:
    """One chunk's generation state; `rows()` runs the hot loop."""

    def __init__(
        self,
        cfg: GeneratorConfig,
        index: int,
        start: int,
        end: int,
        world: BrandWorld,
        shops: ShopWorld,
    ) -> None:
        self.tax = load_taxonomy()
        self.leaves = compile_leaves()
        self.world = world
        self.shops = shops
        self.index = index
        self.start = start
        self.end = end
        self.rng = random.Random(derive_seed(cfg.seed, "chunk", index))
        self.pids = (
            product_ids(cfg.seed).many(np.arange(start, end, dtype=np.uint64))
            + np.uint64(PRODUCT_ID_BASE)
        ).tolist()
        self.bids = base_ids(cfg.seed)
        # spread the lines over the chunks, so that each fits even when chunks are small
        anchors = list(world.lines[index :: n_chunks(cfg)])
        self.rng.shuffle(anchors)
        self.anchors = anchors

    def _pick(self, j: int) -> tuple[int, str, ProductLine | None]:
        if j < len(self.anchors):
            line = self.anchors[j]
            return line.leaf, line.brand, line
        rng = self.rng
        w = self.world
        leaf = bisect.bisect_right(w.leaf_cum_weights, rng.random() * w.leaf_cum_weights[-1])
        cum = w.brand_cum_weights[leaf]
        brands = self.tax.leaves[leaf].brands
        brand = brands[bisect.bisect_right(cum, rng.random() * cum[-1])]
        lines = w.lines_by_group.get((leaf, brand))
        if lines and rng.random() < LINE_SHARE:
            return leaf, brand, lines[int(rng.random() * len(lines))]
        return leaf, brand, None

    def _sellers(self, leaf: int, m: int) -> list[int]:
        sellers = self.shops.sellers[leaf]
        cum = self.shops.seller_cum_weights[leaf]
        m = min(m, len(sellers))
        chosen: list[int] = []
        for _ in range(4 * m):
            s = sellers[bisect.bisect_right(cum, self.rng.random() * cum[-1])]
            if s not in chosen:
                chosen.append(s)
                if len(chosen) == m:
                    break
        return chosen

    def rows(self) -> list[dict]:
        rng = self.rng
        tax = self.tax
        rows: list[dict] = []
        need = self.end - self.start
        j = 0
        while len(rows) < need:
            leaf_i, brand_name, line = self._pick(j)
            lt = self.leaves[leaf_i]
            leaf = lt.leaf
            brand = self.world.brands[brand_name]
            base = draw_base(rng, lt, brand, line, tax)
            base_id = str(self.bids(self.start + j)).zfill(13)
            # gauss is the fast normal of `random` (it caches its second deviate)
            base_price = leaf.price * brand.price_factor * math.exp(rng.gauss(0.0, leaf.sigma))
            base_demand = math.exp(rng.gauss(1.0, 1.8))
            m = LISTINGS[bisect.bisect_right(LISTING_CUM, rng.random() * LISTING_CUM[-1])]
            for s in self._sellers(leaf_i, min(m, need - len(rows))):
                shop = self.shops.shops[s]
                services = []
                if shop.official:
                    services.append("official")
                if rng.random() < shop.free_shipping_rate:
                    services.append("freeShipping")
                if rng.random() < shop.cod_rate:
                    services.append("COD")
                if rng.random() < FLASHSALE_RATE:
                    services.append("flashsale")
                price = price_round(base_price * math.exp(rng.gauss(0.0, LISTING_PRICE_SIGMA)))
                sold = int(base_demand * math.sqrt(shop.size) * math.exp(rng.gauss(0.0, 0.9)))
                rows.append(
                    {
                        "product_id": str(self.pids[len(rows)]),
                        "shop_id": shop.shop_id,
                        "brand": brand_name,
                        "category": leaf.path,
                        "title": listing_title(rng, base, tax),
                        "short_description": listing_short_description(rng, base, tax),
                        "description": base.description,
                        "specification": base.specification,
                        "price": price,
                        "sold_count": sold,
                        "sku_options": base.sku_options,
                        "attributes": base.attributes,
                        "service": services,
                        "base_id": base_id,
                    }
                )
            j += 1
        return rows
