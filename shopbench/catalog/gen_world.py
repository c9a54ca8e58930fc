"""The world model a seed decides: brand profiles, product lines, popularity and shops.

The release fixes *which* brands, leaves, places and materials exist; the seed decides where
each brand is based, when it was founded, how premium and popular it is, which product
lines it runs (each with a notable material and a signature feature), and the shops. The
brand world depends on the seed alone, so the knowledge corpus of a seed states the same
facts whatever the catalog size; the shops depend on the seed and the number of shops.

Every product of a brand states its brand sentence, and every product of a line its line
sentence (see `text.py`), so each fact of the knowledge corpus is visible on the products
it is about.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass
from functools import lru_cache

from shopbench.catalog.gen_ids import SHOP_ID_BASE, derive_seed, shop_ids
from shopbench.catalog.taxonomy import Family, Leaf, Material, Place, Taxonomy, load_taxonomy

LINE_RATE = 0.10  # share of (leaf, brand) groups that run a product line
SECOND_LINE_RATE = 0.15  # of those, share that run a second one
LINE_MATERIAL_RATE = 0.8  # a line names a notable material when its leaf has any
FOREIGN_SHARE: dict[Family, float] = {
    "electronics": 0.55,
    "appliance": 0.45,
    "tools": 0.4,
    "auto": 0.35,
    "beauty": 0.2,
    "toys": 0.3,
    "jewelry": 0.15,
    "sports": 0.2,
    "kitchen": 0.2,
}  # families not listed: 0.08
TIERS = (("budget", 0.7, 0.3), ("mainstream", 1.0, 0.5), ("premium", 1.8, 0.2))
SHOPS_PER_PRODUCTS = 200
MIN_SHOPS = 50
SHOPS_PER_LEAF_MIN = 3

_BRAND_TEMPLATES = (
    "{brand} is based in {city}, {area}, and has made {noun} since {year}.",
    "Since {year}, {brand} has designed {noun} in {city}, {area}.",
    "{brand} has been making {noun} in {city}, {area}, since {year}.",
)


@dataclass(frozen=True)
class BrandProfile:
    """What the seed decides about one brand."""

    name: str
    pool: str
    family: Family
    home: Place
    founded: int
    tier: str
    price_factor: float
    popularity: float
    sentence: str  # stated in the description of every product of the brand


@dataclass(frozen=True)
class ProductLine:
    """A named product line of one brand in one leaf, built around a material and a feature."""

    name: str
    brand: str
    leaf: int
    material: Material | None
    origin: Place | None
    feature: str
    sentence: str  # stated in the description of every product of the line


@dataclass(frozen=True)
class BrandWorld:
    """Brands, lines and leaf popularity for one seed."""

    seed: int
    brands: dict[str, BrandProfile]
    lines: tuple[ProductLine, ...]
    lines_by_group: dict[tuple[int, str], tuple[ProductLine, ...]]
    leaf_weights: tuple[float, ...]
    leaf_cum_weights: tuple[float, ...]
    brand_cum_weights: tuple[tuple[float, ...], ...]  # per leaf, over leaf.brands


@dataclass(frozen=True)
class Shop:
    """A seller: one top category, a handful of leaves within it, its own service habits."""

    index: int
    shop_id: str
    top: str
    leaves: tuple[int, ...]
    official: bool
    free_shipping_rate: float
    cod_rate: float
    size: float


@dataclass(frozen=True)
class ShopWorld:
    """The shops of one catalog and, per leaf, who sells it (with cumulative size weights)."""

    shops: tuple[Shop, ...]
    sellers: tuple[tuple[int, ...], ...]
    seller_cum_weights: tuple[tuple[float, ...], ...]


def n_shops_for(n_products: int) -> int:
    """How many shops a catalog of n_products has: about one per 200 products, at least 50."""
    return max(MIN_SHOPS, round(n_products / SHOPS_PER_PRODUCTS))


def _weighted(rng: random.Random, items: list, weights: list[float]):
    return rng.choices(items, weights=weights, k=1)[0]


def line_sentence(
    line_name: str, material: Material | None, origin: Place | None, feature: str
) -> str:
    """The sentence every product of a line carries; it states all the line's facts."""
    parts = [f"Part of the {line_name} line."]
    if material is not None:
        where = f" from {origin.name}, {origin.area}" if origin is not None else ""
        parts.append(f"Made with {material.name}{where}: {material.property}.")
    parts.append(f"Signature feature: {feature}.")
    return " ".join(parts)


def _brand_profiles(tax: Taxonomy, seed: int) -> dict[str, BrandProfile]:
    rng = random.Random(derive_seed(seed, "brands"))
    local = [p for p in tax.places if p.local]
    foreign = [p for p in tax.places if not p.local]
    profiles: dict[str, BrandProfile] = {}
    for pool, names in tax.pools.items():
        family = tax.pool_family[pool]
        for name in names:
            abroad = rng.random() < FOREIGN_SHARE.get(family, 0.08)
            options = foreign if abroad else local
            home = _weighted(rng, options, [p.weight for p in options])
            founded = rng.randint(1948, 2021)
            tier, factor, _ = _weighted(rng, list(TIERS), [t[2] for t in TIERS])
            popularity = rng.lognormvariate(0.0, 0.8)
            template = rng.choice(_BRAND_TEMPLATES)
            sentence = template.format(
                brand=name,
                city=home.name,
                area=home.area,
                year=founded,
                noun=tax.words.family_nouns[family],
            )
            profiles[name] = BrandProfile(
                name, pool, family, home, founded, tier, factor, popularity, sentence
            )
    return profiles


def _lines(tax: Taxonomy, seed: int) -> list[ProductLine]:
    rng = random.Random(derive_seed(seed, "lines"))
    places = {p.name: p for p in tax.places}
    used_words: dict[str, set[str]] = {}
    lines: list[ProductLine] = []
    for leaf in tax.leaves:
        leaf_features: set[str] = set()
        for brand in leaf.brands:
            n = 0
            if rng.random() < LINE_RATE:
                n = 2 if rng.random() < SECOND_LINE_RATE else 1
            for _ in range(n):
                taken = used_words.setdefault(brand, set())
                word = rng.choice([w for w in tax.words.line_names if w not in taken])
                taken.add(word)
                material = None
                if leaf.materials and rng.random() < LINE_MATERIAL_RATE:
                    material = rng.choice(leaf.materials)
                origin = places[material.origin] if material and material.origin else None
                # distinct features within a leaf, so that a feature points at one line
                fresh = [f for f in leaf.features if f not in leaf_features]
                feature = rng.choice(fresh or list(leaf.features))
                leaf_features.add(feature)
                name = f"{brand} {word}"
                lines.append(
                    ProductLine(
                        name,
                        brand,
                        leaf.index,
                        material,
                        origin,
                        feature,
                        line_sentence(name, material, origin, feature),
                    )
                )
    return lines


def _popularity(
    tax: Taxonomy, seed: int, brands: dict[str, BrandProfile]
) -> tuple[tuple[float, ...], tuple[tuple[float, ...], ...]]:
    """Leaf weights (floored) and, per leaf, cumulative brand weights."""
    rng = random.Random(derive_seed(seed, "popularity"))
    raw = [rng.lognormvariate(0.0, 0.6) for _ in tax.leaves]
    floor = 0.5 * sum(raw) / len(raw)  # every leaf keeps a fair share of the catalog
    leaf_w = [max(w, floor) for w in raw]
    brand_cum: list[tuple[float, ...]] = []
    for leaf in tax.leaves:
        ws = [brands[b].popularity * rng.lognormvariate(0.0, 0.4) for b in leaf.brands]
        brand_cum.append(tuple(itertools.accumulate(ws)))
    return tuple(leaf_w), tuple(brand_cum)


@lru_cache(maxsize=4)
def build_brand_world(seed: int) -> BrandWorld:
    """The brand world of a seed: brand profiles, product lines, leaf and brand popularity."""
    tax = load_taxonomy()
    brands = _brand_profiles(tax, seed)
    lines = _lines(tax, seed)
    by_group: dict[tuple[int, str], list[ProductLine]] = {}
    for line in lines:
        by_group.setdefault((line.leaf, line.brand), []).append(line)
    leaf_w, brand_cum = _popularity(tax, seed, brands)
    return BrandWorld(
        seed=seed,
        brands=brands,
        lines=tuple(lines),
        lines_by_group={k: tuple(v) for k, v in by_group.items()},
        leaf_weights=leaf_w,
        leaf_cum_weights=tuple(itertools.accumulate(leaf_w)),
        brand_cum_weights=brand_cum,
    )


def _assign_tops(tax: Taxonomy, rng: random.Random, n_shops: int) -> list[str]:
    leaves_per_top = {t: sum(1 for leaf in tax.leaves if leaf.top == t) for t in tax.tops}
    # the first shops cover every top twice, so that every leaf can find sellers
    tops = [t for _ in range(SHOPS_PER_LEAF_MIN) for t in tax.tops][:n_shops]
    weights = [leaves_per_top[t] for t in tax.tops]
    tops += rng.choices(list(tax.tops), weights=weights, k=n_shops - len(tops))
    rng.shuffle(tops)
    return tops


@lru_cache(maxsize=4)
def build_shops(seed: int, n_shops: int) -> ShopWorld:
    """The shops of a catalog: ids, category focus, services.

    Every leaf gets at least three sellers where its top category has three shops, and at
    least two always (the first shops cover every top category in turn).
    """
    tax = load_taxonomy()
    world = build_brand_world(seed)
    rng = random.Random(derive_seed(seed, "shops", n_shops))
    ids = shop_ids(seed)
    leaf_w = world.leaf_weights
    by_top: dict[str, list[Leaf]] = {}
    for leaf in tax.leaves:
        by_top.setdefault(leaf.top, []).append(leaf)

    tops = _assign_tops(tax, rng, n_shops)
    shop_leaves: list[set[int]] = []
    for top in tops:
        pool = by_top[top]
        k = min(len(pool), rng.randint(3, 8))
        chosen: set[int] = set()
        while len(chosen) < k:
            chosen.add(_weighted(rng, pool, [leaf_w[x.index] for x in pool]).index)
        shop_leaves.append(chosen)

    sellers: list[list[int]] = [[] for _ in tax.leaves]
    for s, chosen in enumerate(shop_leaves):
        for li in chosen:
            sellers[li].append(s)
    shops_of_top: dict[str, list[int]] = {}
    for s, top in enumerate(tops):
        shops_of_top.setdefault(top, []).append(s)
    for leaf in tax.leaves:  # top up thin leaves with shops of the same top category
        have = sellers[leaf.index]
        if len(have) >= SHOPS_PER_LEAF_MIN:
            continue
        taken = set(have)
        spare = [s for s in shops_of_top[leaf.top] if s not in taken]
        rng.shuffle(spare)
        while len(have) < SHOPS_PER_LEAF_MIN and spare:
            s = spare.pop()
            shop_leaves[s].add(leaf.index)
            have.append(s)

    shops = []
    for s, top in enumerate(tops):
        official = rng.random() < 0.12
        shops.append(
            Shop(
                index=s,
                shop_id=str(SHOP_ID_BASE + ids(s)),
                top=top,
                leaves=tuple(sorted(shop_leaves[s])),
                official=official,
                # official stores ship free more often; COD is the Philippine default
                free_shipping_rate=rng.uniform(0.35, 0.9) if official else rng.uniform(0.1, 0.7),
                cod_rate=rng.uniform(0.5, 0.98),
                size=rng.lognormvariate(0.0, 1.0) * (2.0 if official else 1.0),
            )
        )
    cum = tuple(
        tuple(itertools.accumulate(shops[s].size for s in leaf_sellers)) for leaf_sellers in sellers
    )
    return ShopWorld(tuple(shops), tuple(tuple(s) for s in sellers), cum)


def price_round(p: float) -> float:
    """A marketplace-looking price: whole pesos; endings in 9 from 100, in 49/99 from 1000."""
    if p < 100:
        return float(max(1, round(p)))
    if p < 1000:
        return float(max(99, math.floor(p / 10) * 10 + 9))
    return float(max(999, round(p / 50) * 50 - 1))
