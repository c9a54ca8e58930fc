"""The release's public catalog data: category tree, brands, vocabularies, materials, places.

Everything here is fixed by the release, identical for every validator, and public; the
secret seed only decides how products are drawn from it (see `generator.py`). The JSON
files live in `shopbench/catalog/data/`; `load_taxonomy()` reads and cross-checks them once
per process and returns a frozen, resolved view (`Taxonomy`) that the generator and the
knowledge corpus share.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shopbench.catalog.errors import CatalogError
from shopbench.errors import first_problem

DATA_PACKAGE = "shopbench.catalog"  # the JSON files are in its data/ folder
FILES = (
    "taxonomy.json",
    "attributes.json",
    "brands.json",
    "materials.json",
    "places.json",
    "words.json",
)
MIN_BRANDS_PER_LEAF = 5
MAX_BRANDS_PER_LEAF = 20

Family = Literal[
    "apparel",
    "footwear",
    "bags",
    "beauty",
    "food",
    "electronics",
    "appliance",
    "kitchen",
    "home",
    "tools",
    "auto",
    "pets",
    "toys",
    "stationery",
    "jewelry",
    "sports",
    "baby",
]
FAMILIES: tuple[Family, ...] = Family.__args__  # type: ignore[attr-defined]


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LeafSpec(_Strict):
    """One leaf category as written in taxonomy.json."""

    name: str = Field(min_length=1, description="leaf name, unique across the tree")
    nouns: list[str] = Field(min_length=1, description="what titles call the product")
    price: float = Field(gt=0, description="median listing price in pesos")
    sigma: float = Field(default=0.45, gt=0, le=1.5, description="log-normal price spread")
    attrs: list[str] = Field(default_factory=list, description="attribute ids added to the mid's")
    sku: list[str] | None = Field(default=None, description="SKU option ids; None: the mid's")
    material_key: str | None = Field(default=None, description="None: the mid's")


class MidSpec(_Strict):
    """A mid category: the defaults its leaves share."""

    name: str = Field(min_length=1)
    family: Family = Field(description="decides signature features and text phrasing")
    pool: str = Field(description="brand pool in brands.json")
    material_key: str = Field(description="attribute key that names a product's material")
    words: list[str] = Field(min_length=3, description="descriptors for titles")
    attrs: list[str] = Field(default_factory=list)
    sku: list[str] = Field(min_length=1, max_length=2)
    leaves: list[LeafSpec] = Field(min_length=1)


class TopSpec(_Strict):
    name: str = Field(min_length=1)
    mids: list[MidSpec] = Field(min_length=1)


class TreeFile(_Strict):
    doc: str = Field(alias="_doc")
    tops: list[TopSpec] = Field(min_length=1)


class Material(_Strict):
    """A notable material or ingredient that product lines are built around."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    name: str = Field(min_length=1)
    kind: str = Field(min_length=1, description="what it is, for encyclopedic text")
    origin: str | None = Field(description="place it comes from (places.json), if any")
    property: str = Field(min_length=1, description="stated on every product made of it")
    used_for: list[str] = Field(alias="for", min_length=1, description="leaf or mid names")


class MaterialsFile(_Strict):
    doc: str = Field(alias="_doc")
    materials: list[Material]
    features: dict[str, list[str]] = Field(description="signature features per mid category")


class Place(_Strict):
    """A city or town where brands are based or materials come from."""

    name: str = Field(min_length=1)
    area: str = Field(min_length=1, description="province, region or (abroad) country")
    area_kind: Literal["province", "region", "country"]
    region: str
    weight: float = Field(gt=0, description="relative chance that a brand is based here")
    blurb: str = Field(min_length=1, description="completes '<name> is ...'")

    @property
    def local(self) -> bool:
        """Whether the place is in the Philippines."""
        return self.area_kind != "country"


class PlacesFile(_Strict):
    doc: str = Field(alias="_doc")
    places: list[Place] = Field(min_length=1)


class Words(_Strict):
    """Title noise, line names and sentence templates (words.json)."""

    doc: str = Field(alias="_doc")
    title_prefixes: list[str] = Field(min_length=1)
    title_suffixes: list[str] = Field(min_length=1)
    pack_words: list[str] = Field(min_length=1)
    line_names: list[str] = Field(min_length=20)
    family_nouns: dict[Family, str]
    uses: dict[Family, list[str]]
    intros: list[str] = Field(min_length=1)
    value_sentences: list[str] = Field(min_length=1)
    shorts: list[str] = Field(min_length=1)
    closings: list[str] = Field(min_length=1)
    listing_notes: list[str] = Field(min_length=1)


def attr_key(attr_id: str) -> str:
    """The attribute key products carry for a vocabulary id (`size@shoes` -> `size`)."""
    return attr_id.split("@", 1)[0]


@dataclass(frozen=True)
class Leaf:
    """A resolved leaf category: its own fields merged with its mid category's defaults."""

    index: int
    name: str
    top: str
    mid: str
    path: str
    family: Family
    pool: str
    nouns: tuple[str, ...]
    price: float
    sigma: float
    words: tuple[str, ...]
    attrs: tuple[str, ...]
    own_attrs: tuple[str, ...]
    sku: tuple[str, ...]
    material_key: str
    brands: tuple[str, ...]
    materials: tuple[Material, ...]
    features: tuple[str, ...]


@dataclass(frozen=True)
class Taxonomy:
    """Everything the release fixes, resolved and cross-checked."""

    tops: tuple[str, ...]
    leaves: tuple[Leaf, ...]
    vocab: dict[str, tuple[str, ...]]
    pools: dict[str, tuple[str, ...]]
    pool_family: dict[str, Family]
    materials: tuple[Material, ...]
    places: tuple[Place, ...]
    words: Words

    def leaf(self, name: str) -> Leaf:
        """The leaf with this name; CatalogError naming the allowed names if there is none."""
        for leaf in self.leaves:
            if leaf.name == name:
                return leaf
        raise CatalogError(f"unknown leaf category {name!r} (see taxonomy.json)")

    def place(self, name: str) -> Place:
        """The place with this name; CatalogError if it is not in places.json."""
        for place in self.places:
            if place.name == name:
                return place
        raise CatalogError(f"unknown place {name!r} (see places.json)")

    @property
    def brands(self) -> tuple[str, ...]:
        """Every brand of the release, pool by pool in file order."""
        return tuple(b for pool in self.pools.values() for b in pool)


def _no_duplicate_keys(path: str):
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in pairs:
            if k in out:
                raise CatalogError(f"{path}: duplicate key {k!r}")
            out[k] = v
        return out

    return hook


def _read(name: str) -> Any:
    text = resources.files(DATA_PACKAGE).joinpath("data", name).read_text(encoding="utf-8")
    try:
        return json.loads(text, object_pairs_hook=_no_duplicate_keys(name))
    except json.JSONDecodeError as e:
        raise CatalogError(f"{name}:{e.lineno}: invalid JSON ({e.msg})") from None


def _model(name: str, model: type[BaseModel], raw: Any) -> Any:
    try:
        return model.model_validate(raw)
    except ValidationError as e:
        raise CatalogError(f"{name}: {first_problem(e)}") from None


def _vocab(raw: Any) -> dict[str, tuple[str, ...]]:
    vocab: dict[str, tuple[str, ...]] = {}
    for key, values in raw.items():
        if key == "_doc":
            continue
        if not (isinstance(values, list) and values and all(isinstance(v, str) for v in values)):
            raise CatalogError(f"attributes.json: {key!r} must be a non-empty list of strings")
        if len(set(values)) != len(values):
            raise CatalogError(f"attributes.json: {key!r} repeats a value")
        vocab[key] = tuple(values)
    return vocab


def _pools(raw: Any) -> dict[str, tuple[str, ...]]:
    pools: dict[str, tuple[str, ...]] = {}
    seen: set[str] = set()
    for pool, names in raw.items():
        if pool == "_doc":
            continue
        for b in names:
            if b in seen:
                raise CatalogError(f"brands.json: brand {b!r} appears twice")
            seen.add(b)
        pools[pool] = tuple(names)
    return pools


def _resolve(
    tree: TreeFile,
    vocab: dict[str, tuple[str, ...]],
    pools: dict[str, tuple[str, ...]],
    materials: tuple[Material, ...],
    features: dict[str, list[str]],
) -> tuple[tuple[Leaf, ...], dict[str, Family]]:
    leaves: list[Leaf] = []
    pool_family: dict[str, Family] = {}
    names: set[str] = set()
    for top in tree.tops:
        for mid in top.mids:
            if mid.pool not in pools:
                raise CatalogError(f"taxonomy.json: {mid.name}: unknown brand pool {mid.pool!r}")
            if pool_family.setdefault(mid.pool, mid.family) != mid.family:
                raise CatalogError(f"taxonomy.json: pool {mid.pool!r} used by two families")
            if len(features.get(mid.name, ())) < 3:
                raise CatalogError(f"materials.json: features: {mid.name!r} needs 3+ features")
            for spec in mid.leaves:
                if spec.name in names:
                    raise CatalogError(f"taxonomy.json: leaf name {spec.name!r} is not unique")
                names.add(spec.name)
                attrs = tuple(dict.fromkeys(list(mid.attrs) + list(spec.attrs)))
                sku = tuple(spec.sku if spec.sku is not None else mid.sku)
                for a in attrs + sku:
                    if a not in vocab:
                        raise CatalogError(
                            f"taxonomy.json: {spec.name}: attribute id {a!r} not in attributes.json"
                        )
                brands = pools[mid.pool]
                if not MIN_BRANDS_PER_LEAF <= len(brands) <= MAX_BRANDS_PER_LEAF:
                    raise CatalogError(
                        f"brands.json: pool {mid.pool!r} has {len(brands)} brands, leaves need"
                        f" {MIN_BRANDS_PER_LEAF}-{MAX_BRANDS_PER_LEAF}"
                    )
                leaves.append(
                    Leaf(
                        index=len(leaves),
                        name=spec.name,
                        top=top.name,
                        mid=mid.name,
                        path=f"{top.name} > {mid.name} > {spec.name}",
                        family=mid.family,
                        pool=mid.pool,
                        nouns=tuple(spec.nouns),
                        price=spec.price,
                        sigma=spec.sigma,
                        words=tuple(mid.words),
                        attrs=attrs,
                        own_attrs=tuple(a for a in spec.attrs),
                        sku=sku,
                        material_key=spec.material_key or mid.material_key,
                        brands=brands,
                        materials=tuple(
                            m for m in materials if {spec.name, mid.name} & set(m.used_for)
                        ),
                        features=tuple(features[mid.name]),
                    )
                )
    return tuple(leaves), pool_family


@lru_cache(maxsize=1)
def load_taxonomy() -> Taxonomy:
    """Read, validate and resolve the release data; the same object for the whole process.

    Raises CatalogError naming the file and the fault when the data is inconsistent (an
    unknown attribute id, brand pool or place; a repeated leaf or brand name; ...).
    """
    tree = _model("taxonomy.json", TreeFile, _read("taxonomy.json"))
    vocab = _vocab(_read("attributes.json"))
    pools = _pools(_read("brands.json"))
    mats: MaterialsFile = _model("materials.json", MaterialsFile, _read("materials.json"))
    places: PlacesFile = _model("places.json", PlacesFile, _read("places.json"))
    words: Words = _model("words.json", Words, _read("words.json"))

    place_names = {p.name for p in places.places}
    if len(place_names) != len(places.places):
        raise CatalogError("places.json: a place name appears twice")
    known_targets = {leaf.name for t in tree.tops for m in t.mids for leaf in m.leaves}
    known_targets |= {m.name for t in tree.tops for m in t.mids}
    seen_materials: set[str] = set()
    for m in mats.materials:
        if m.name in seen_materials:
            raise CatalogError(f"materials.json: material {m.name!r} appears twice")
        seen_materials.add(m.name)
        if m.origin is not None and m.origin not in place_names:
            raise CatalogError(f"materials.json: {m.name}: unknown origin place {m.origin!r}")
        for target in m.used_for:
            if target not in known_targets:
                raise CatalogError(f"materials.json: {m.name}: unknown category {target!r}")

    for label, table in (
        ("words.json uses", words.uses),
        ("words.json family_nouns", words.family_nouns),
    ):
        missing = [f for f in FAMILIES if f not in table]
        if missing:
            raise CatalogError(f"{label}: no entry for families {missing}")

    leaves, pool_family = _resolve(tree, vocab, pools, tuple(mats.materials), mats.features)
    mid_names = {m.name for t in tree.tops for m in t.mids}
    stray = sorted(set(mats.features) - mid_names)
    if stray:
        raise CatalogError(f"materials.json: features for unknown mid categories {stray}")
    unused = set(pools) - set(pool_family)
    if unused:
        raise CatalogError(f"brands.json: pools used by no category: {sorted(unused)}")
    return Taxonomy(
        tops=tuple(t.name for t in tree.tops),
        leaves=leaves,
        vocab=vocab,
        pools=pools,
        pool_family=pool_family,
        materials=tuple(mats.materials),
        places=tuple(places.places),
        words=words,
    )
