"""Product texts: attributes, SKU options, titles, descriptions and specifications.

A base product's content (attributes, options, description, specification, the parts of
its title) is drawn once and shared by every shop that lists it; each listing then noises
its own title ("Original", "COD", "[Sealed]", pack counts, words dropped or reordered),
much as marketplace sellers copy and re-word one supplier listing.

Promises the knowledge corpus relies on: a product's description always contains its
brand sentence (home city, area, founding year) and, for a product of a line, the line
sentence (line name, material, its origin and property, signature feature).

Everything here runs in the generator's hot loop: vocabularies are compiled once per leaf,
and no pydantic model is built per product.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache

from shopbench.catalog.gen_world import BrandProfile, ProductLine
from shopbench.catalog.taxonomy import Leaf, Taxonomy, attr_key, load_taxonomy

MAX_SKU_OPTIONS = 8
_LABEL_PREFIXES = ("fa_", "m_", "type_of_", "types_of_")
_NON_TITLE_SKU_KEYS = frozenset(
    {"color_family", "size", "shade", "variation", "scent", "flavor", "compatibility_by_model"}
)
_NON_TITLE_ATTR_KEYS = frozenset({"brand_classification"})
# bare values that need their noun in a title ("Low" -> "Low Waist")
_TITLE_SUFFIX = {"waist_type": " Waist", "roast_level": " Roast", "resistance_level": " Resistance"}


def _label(key: str) -> str:
    for prefix in _LABEL_PREFIXES:
        if key.startswith(prefix):
            key = key[len(prefix) :]
    return key.replace("_", " ").strip()


def _article(phrase: str) -> str:
    return "an" if phrase[:1].lower() in "aeiou" else "a"


def _title_case(value: str) -> str:
    # keep unit tokens like "500ml" or "eu:40" as written; capitalise plain words
    return " ".join(
        w if any(c.isdigit() for c in w) else w[:1].upper() + w[1:] for w in value.split()
    )


@dataclass(frozen=True)
class LeafText:
    """A leaf's vocabularies, compiled for fast drawing."""

    leaf: Leaf
    # (key, values, values as written in titles, label for descriptions)
    attrs: tuple[tuple[str, tuple[str, ...], tuple[str, ...], str], ...]
    own_keys: frozenset[str]  # named in titles often
    other_keys: frozenset[str]  # named in titles sometimes
    sku: tuple[tuple[str, tuple[str, ...]], ...]
    nouns: tuple[str, ...]
    words: tuple[str, ...]
    uses: tuple[str, ...]
    family_noun: str


@lru_cache(maxsize=1)
def compile_leaves() -> tuple[LeafText, ...]:
    """Per-leaf vocabularies of the release, in leaf order."""
    tax: Taxonomy = load_taxonomy()
    out = []
    for leaf in tax.leaves:
        attrs = []
        for aid in leaf.attrs:
            values = tax.vocab[aid]
            key = attr_key(aid)
            suffix = _TITLE_SUFFIX.get(key, "")
            titled = tuple(_title_case(v) + suffix for v in values)
            attrs.append((key, values, titled, _label(key)))
        out.append(
            LeafText(
                leaf=leaf,
                attrs=tuple(attrs),
                own_keys=frozenset(attr_key(a) for a in leaf.own_attrs) - _NON_TITLE_ATTR_KEYS,
                other_keys=frozenset(attr_key(a) for a in leaf.attrs if a not in leaf.own_attrs)
                - _NON_TITLE_ATTR_KEYS,
                sku=tuple((attr_key(s), tax.vocab[s]) for s in leaf.sku),
                nouns=leaf.nouns,
                words=leaf.words,
                uses=tuple(tax.words.uses[leaf.family]),
                family_noun=tax.words.family_nouns[leaf.family],
            )
        )
    return tuple(out)


@dataclass
class BaseContent:
    """What every listing of one base product shares."""

    noun: str
    brand_token: str
    line_token: str
    middle: list[str]
    tail: list[str]
    attributes: dict[str, list[str]]
    sku_options: dict[str, dict[str, str]]
    short_core: str
    description: str
    specification: str


def _pick(rand, seq):
    # indexing by random() is several times faster than random.choice, and just as uniform
    # for sequences this short
    return seq[int(rand() * len(seq))]


def _sample(rand, seq, k: int) -> list:
    pool = list(seq)
    out = []
    for _ in range(k):
        out.append(pool.pop(int(rand() * len(pool))))
    return out


def draw_sku_options(
    rng: random.Random, sku: tuple[tuple[str, tuple[str, ...]], ...]
) -> dict[str, dict[str, str]]:
    """1-8 purchasable combinations over the leaf's option kinds, keyed "0", "1", ..."""
    rand = rng.random
    chosen: list[tuple[str, list[str]]] = []
    budget = MAX_SKU_OPTIONS
    for n_kind, (key, values) in enumerate(sku):
        last = n_kind == len(sku) - 1
        cap = min(len(values), budget if last else max(1, min(5, budget // 2)))
        k = 1 + int(rand() * cap)
        if key == "size":  # sizes come as a run, as sellers stock them
            start = int(rand() * (len(values) - k + 1))
            picked = list(values[start : start + k])
        else:
            picked = _sample(rand, values, k)
        chosen.append((key, picked))
        budget = max(1, budget // k)
    combos: list[dict[str, str]] = [{}]
    for key, picked in chosen:
        combos = [{**c, key: v} for c in combos for v in picked]
    return {str(i): c for i, c in enumerate(combos[:MAX_SKU_OPTIONS])}


def draw_base(
    rng: random.Random, lt: LeafText, brand: BrandProfile, line: ProductLine | None, tax: Taxonomy
) -> BaseContent:
    """Draw one base product's attributes, options and texts (see the module docstring)."""
    leaf = lt.leaf
    words = tax.words
    rand = rng.random
    noun = _pick(rand, lt.nouns)
    noun_l = noun.lower()
    attributes: dict[str, list[str]] = {"brand": [brand.name.lower()]}
    middle: list[str] = []
    details: list[str] = []
    # a line's material replaces whatever the material attribute would have been
    material = line.material.name if line is not None and line.material is not None else None
    for key, values, titled, label in lt.attrs:
        if material is not None and key == leaf.material_key:
            value, in_title = material, _title_case(material)
        else:
            i = int(rand() * len(values))
            value, in_title = values[i], titled[i]
        attributes[key] = [value]
        details.append(f"{label}: {value}")
        # a leaf's own attributes name the product ("Baggy Fit High Waist Jeans")
        p = 0.6 if key in lt.own_keys else 0.2 if key in lt.other_keys else 0.0
        if rand() < p and value not in noun_l:
            middle.append(in_title)
    if material is not None and leaf.material_key not in attributes:
        attributes[leaf.material_key] = [material]
        details.append(f"{_label(leaf.material_key)}: {material}")
    attributes["country_origin_hb"] = [
        "philippines" if brand.home.local else brand.home.area.lower()
    ]
    desc_words = _sample(rand, lt.words, 1 + int(rand() * 3))
    middle = desc_words + middle
    rng.shuffle(middle)

    sku_options = draw_sku_options(rng, lt.sku)
    tail: list[str] = []
    if line is not None and rand() < 0.5:
        tail.append(_title_case(line.feature))
    first = sku_options["0"]
    for key, value in first.items():
        if key not in _NON_TITLE_SKU_KEYS and rand() < 0.35:
            tail.append(value)

    desc_phrase = " and ".join(w.lower() for w in desc_words[:2])
    a_desc = f"{_article(desc_phrase)} {desc_phrase}"
    values_text = ", ".join(details[:4]) if details else noun_l
    sentences = [
        _pick(rand, words.intros).format(
            brand=brand.name,
            noun=noun,
            noun_l=noun_l,
            desc=desc_phrase,
            a_desc=a_desc,
            A_desc=a_desc[:1].upper() + a_desc[1:],
            a_noun=f"{_article(noun_l)} {noun_l}",
            use=_pick(rand, lt.uses),
        ),
        _pick(rand, words.value_sentences).format(values="; ".join(details) or noun_l),
        brand.sentence,
    ]
    if line is not None:
        sentences.append(line.sentence)
    if len(sku_options) > 1:
        opts = [" / ".join(c.values()) for c in sku_options.values()]
        sentences.append(f"Available options: {', '.join(opts)}.")
    sentences.append(_pick(rand, words.closings).format(noun_l=noun_l))
    description = " ".join(sentences)

    spec_lines = [f"brand: {brand.name}"]
    spec_lines += [f"{k}: {', '.join(v)}" for k, v in attributes.items() if k != "brand"]
    for key in first:
        offered = dict.fromkeys(c[key] for c in sku_options.values())
        spec_lines.append(f"{key}: {', '.join(offered)}")
    spec_lines.append(f"model: {brand.name[:2].upper()}-{100 + int(rand() * 9900)}")
    short_desc = desc_words[0]
    short_core = _pick(rand, words.shorts).format(
        brand=brand.name,
        noun=noun,
        noun_l=noun_l,
        desc=short_desc,
        A_desc=f"{_article(short_desc).capitalize()} {short_desc}",
        values=values_text,
    )
    return BaseContent(
        noun=noun,
        brand_token=brand.name,
        line_token=line.name[len(brand.name) + 1 :] if line is not None else "",
        middle=middle,
        tail=tail,
        attributes=attributes,
        sku_options=sku_options,
        short_core=short_core,
        description=description,
        specification="\n".join(spec_lines),
    )


def listing_title(rng: random.Random, base: BaseContent, tax: Taxonomy) -> str:
    """One shop's title for a base product: the shared parts, re-worded and noised."""
    words = tax.words
    rand = rng.random
    parts: list[str] = []
    if rand() < 0.35:
        parts.append(_pick(rand, words.title_prefixes))
    if rand() < 0.88:
        parts.append(base.brand_token)
    if base.line_token and rand() < 0.9:
        parts.append(base.line_token)
    middle = base.middle
    if middle and rand() < 0.5:
        middle = middle[:]
        rng.shuffle(middle)
        if len(middle) > 2 and rand() < 0.5:
            middle.pop()  # sellers trim long titles
    if middle and rand() < 0.3:
        cut = int(rand() * len(middle))
        parts += middle[:cut]
        parts.append(base.noun)
        parts += middle[cut:]
    else:
        parts += middle
        parts.append(base.noun)
    parts += base.tail
    if rand() < 0.15:
        parts.append(_pick(rand, words.pack_words))
    if rand() < 0.3:
        parts.append(_pick(rand, words.title_suffixes))
    return " ".join(parts)


def listing_short_description(rng: random.Random, base: BaseContent, tax: Taxonomy) -> str:
    """The shared short description plus, sometimes, the shop's own note."""
    note = _pick(rng.random, tax.words.listing_notes)
    return f"{base.short_core} {note}" if note else base.short_core
