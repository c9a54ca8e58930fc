"""Writers for the knowledge corpus: short encyclopedic and shopping-guide pages.

Each page states a few facts about its subject and some about neighbours (a rival brand's
home city, another line's feature): the neighbours' facts are true too, and serve as
distractors for an agent that skims. Pages cover the seed's notable entities only: brands
that run product lines, those lines, the materials they use, the places those brands and
materials come from, and buying guides for leaves with several lines. Every fact a page
states is listed with it, as (entity, kind, attribute, value).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import TypeVar

from shopbench.catalog.gen_ids import derive_seed
from shopbench.catalog.gen_world import BrandProfile, BrandWorld, ProductLine
from shopbench.catalog.taxonomy import Material, Place, Taxonomy

# Fact attributes: each value is stated on the products the fact is about (see text.py).
BRAND_HOME_CITY = "home_city"
BRAND_HOME_AREA = "home_area"
BRAND_FOUNDED = "founded_year"
LINE_BRAND = "brand"
LINE_MATERIAL = "material"
LINE_FEATURE = "signature_feature"
MATERIAL_ORIGIN = "origin"
MATERIAL_PROPERTY = "property"
PLACE_AREA = "area"
PLACE_KNOWN_FOR = "known_for"

MIN_WORDS = 80
MAX_WORDS = 400
MAX_LINES_PER_BRAND_PAGE = 3
MAX_GUIDE_LINES = 5

FactTuple = tuple[str, str, str, str]
T = TypeVar("T")

_TIER_WORDS = {"budget": "value-priced", "mainstream": "mid-priced", "premium": "premium"}
_PADDING = {
    "brand": (
        "Its products are sold by many independent shops on the marketplace, so prices can vary "
        "from one listing to the next.",
        "Buyers usually compare several listings of the same item before ordering, since shops "
        "differ in shipping fees and delivery times.",
        "Reviews tend to praise its consistent sizing and sturdy packaging.",
        "Like many local labels, it sells mostly online and through weekend bazaars.",
        "Official stores of the brand usually carry the full range and honour warranty claims.",
        "Its listings often bundle small freebies during mega sale days.",
        "Customer service is handled through the chat of each selling shop.",
    ),
    "line": (
        "Reviewers note that listings of the same line can differ in price by a few percent "
        "between shops.",
        "The line is restocked several times a year, and popular variants sell out quickly.",
        "Buyers recommend checking the option list, since not every shop carries every variant.",
        "The line's packaging names the line on the front, which helps spot genuine stock.",
        "Most buyers say the line is worth its price, though a few wish it came in more variants.",
        "Sellers usually ship it within two days, and many offer cash on delivery.",
        "Reviewers also like that the product photos match what arrives.",
    ),
    "material": (
        "Products made of it usually say so in their descriptions, which makes them easy to "
        "find with a search.",
        "Prices depend on the grade of the raw material and on how much of the work is done by "
        "hand.",
        "Makers say demand has grown as shoppers look for materials with a clear origin.",
        "Care instructions differ by product, so buyers should read each listing's notes.",
        "Craft groups and small companies both work with it, at very different scales.",
        "Its look and feel are easy to recognise once you have handled it.",
    ),
    "place": (
        "Local shops and online sellers ship products from here to the rest of the country.",
        "Many small workshops in the area sell directly to shoppers online.",
        "Visitors often bring home local products as pasalubong for family and friends.",
        "The local economy mixes farming, trade and small manufacturing.",
        "Its markets are busiest in the weeks before the town fiesta and Christmas.",
        "Roads and ferries link it to nearby towns, and couriers pick up parcels daily.",
        "Many families here run small businesses from their homes.",
    ),
    "guide": (
        "Compare prices across shops: the same item is often listed by several sellers.",
        "Check each listing's services, such as free shipping, cash on delivery or an official "
        "store badge.",
        "Read the option list before buying, since sizes, colors and capacities differ between "
        "listings.",
        "Look at how many units a listing has sold: a high count usually means a reliable seller.",
        "Read recent reviews with photos, which show what buyers actually received.",
        "Keep the receipt and the packaging until you are sure the item is right.",
    ),
}


def slug(text: str) -> str:
    """A lowercase, hyphenated id fragment ('Cebu City' -> 'cebu-city')."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _join(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


@dataclass
class PageDraft:
    """A page being written: sentences plus the facts they state."""

    page_id: str
    title: str
    kind: str
    sentences: list[str] = field(default_factory=list)
    facts: list[FactTuple] = field(default_factory=list)

    def say(self, sentence: str, *facts: FactTuple) -> None:
        self.sentences.append(sentence)
        self.facts.extend(facts)

    def words(self) -> int:
        return sum(len(s.split()) for s in self.sentences)

    def text(self) -> str:
        return " ".join(self.sentences)


class PageWriter:
    """Writes every page of one seed's corpus; `pages()` returns them in a fixed order."""

    def __init__(self, tax: Taxonomy, world: BrandWorld, seed: int) -> None:
        self.tax = tax
        self.world = world
        self.rng = random.Random(derive_seed(seed, "knowledge"))
        self.places = {p.name: p for p in tax.places}
        self.lines_by_brand: dict[str, list[ProductLine]] = {}
        self.lines_by_material: dict[str, list[ProductLine]] = {}
        self.lines_by_leaf: dict[int, list[ProductLine]] = {}
        for line in world.lines:
            self.lines_by_brand.setdefault(line.brand, []).append(line)
            self.lines_by_leaf.setdefault(line.leaf, []).append(line)
            if line.material is not None:
                self.lines_by_material.setdefault(line.material.name, []).append(line)
        self.notable = [b for b in tax.brands if b in self.lines_by_brand]
        self.brands_by_place: dict[str, list[BrandProfile]] = {}
        for name in self.notable:
            profile = world.brands[name]
            self.brands_by_place.setdefault(profile.home.name, []).append(profile)

    # -- facts ----------------------------------------------------------------------------
    @staticmethod
    def _brand_facts(b: BrandProfile) -> tuple[FactTuple, ...]:
        return (
            (b.name, "brand", BRAND_HOME_CITY, b.home.name),
            (b.name, "brand", BRAND_HOME_AREA, b.home.area),
        )

    @staticmethod
    def _line_facts(line: ProductLine) -> list[FactTuple]:
        facts = [
            (line.name, "line", LINE_BRAND, line.brand),
            (line.name, "line", LINE_FEATURE, line.feature),
        ]
        if line.material is not None:
            facts.append((line.name, "line", LINE_MATERIAL, line.material.name))
        return facts

    def _leaf_noun(self, line: ProductLine) -> str:
        return self.tax.leaves[line.leaf].name.lower()

    def _line_clause(self, line: ProductLine) -> str:
        made = f" are made with {line.material.name} and" if line.material is not None else ""
        return f"the {line.name} {self._leaf_noun(line)}{made} feature {line.feature}"

    def _other(self, pool: list[T], exclude: T) -> T | None:
        """A random member of pool other than exclude, or None."""
        options = [x for x in pool if x is not exclude]
        return options[int(self.rng.random() * len(options))] if options else None

    def _finish(self, page: PageDraft) -> PageDraft:
        padding = list(_PADDING[page.kind])
        self.rng.shuffle(padding)
        while page.words() < MIN_WORDS and padding:
            page.say(padding.pop())
        return page

    # -- pages ----------------------------------------------------------------------------
    def brand_page(self, name: str) -> PageDraft:
        b = self.world.brands[name]
        lines = self.lines_by_brand[name]
        page = PageDraft(f"brand-{slug(name)}", name, "brand")
        noun = self.tax.words.family_nouns[b.family]
        page.say(
            f"{name} is a {_TIER_WORDS[b.tier]} brand of {noun} based in {b.home.name}, "
            f"{b.home.area}.",
            *self._brand_facts(b),
        )
        page.say(f"It was founded in {b.founded}.", (name, "brand", BRAND_FOUNDED, str(b.founded)))
        page.say(f"{b.home.name} is {b.home.blurb}.")
        leaves = sorted({self.tax.leaves[x.leaf].name.lower() for x in lines})
        page.say(f"The brand is best known for its {_join(leaves)}.")
        for line in lines[:MAX_LINES_PER_BRAND_PAGE]:
            page.say(_cap(self._line_clause(line)) + ".", *self._line_facts(line))
        rival = self._other(
            [self.world.brands[x] for x in self.notable if self.world.brands[x].family == b.family],
            b,
        )
        if rival is not None and rival.home.name != b.home.name:
            page.say(
                f"It is sometimes confused with {rival.name}, which is based in "
                f"{rival.home.name}, {rival.home.area}.",
                *self._brand_facts(rival),
            )
        return self._finish(page)

    def line_page(self, line: ProductLine) -> PageDraft:
        b = self.world.brands[line.brand]
        leaf = self.tax.leaves[line.leaf]
        page = PageDraft(f"line-{slug(line.name)}", f"{line.name} {leaf.name}", "line")
        page.say(
            f"The {line.name} is a line of {leaf.name.lower()} by {line.brand}, a brand "
            f"from {b.home.name}.",
            (line.name, "line", LINE_BRAND, line.brand),
            (b.name, "brand", BRAND_HOME_CITY, b.home.name),
        )
        m = line.material
        if m is not None:
            page.say(
                f"Every piece in the line is made with {m.name}, a {m.kind}.",
                (line.name, "line", LINE_MATERIAL, m.name),
            )
            page.say(
                f"{_cap(m.name)} is valued because it is {m.property}.",
                (m.name, "material", MATERIAL_PROPERTY, m.property),
            )
            if line.origin is not None:
                page.say(
                    f"The {m.name} used here comes from {line.origin.name}, {line.origin.area}.",
                    (m.name, "material", MATERIAL_ORIGIN, line.origin.name),
                )
        page.say(
            f"Its signature feature is {line.feature}.",
            (line.name, "line", LINE_FEATURE, line.feature),
        )
        rival = self._other(self.lines_by_leaf[line.leaf], line)
        if rival is not None:
            page.say(
                f"Shoppers often compare it with the {rival.name} line, whose signature "
                f"feature is {rival.feature}.",
                (rival.name, "line", LINE_FEATURE, rival.feature),
            )
        return self._finish(page)

    def material_page(self, m: Material) -> PageDraft:
        lines = self.lines_by_material[m.name]
        page = PageDraft(f"material-{slug(m.name)}", _cap(m.name), "material")
        page.say(f"{_cap(m.name)} is a {m.kind}.")
        page.say(
            f"It is prized because it is {m.property}.",
            (m.name, "material", MATERIAL_PROPERTY, m.property),
        )
        if m.origin is not None:
            origin = self.places[m.origin]
            page.say(
                f"Most of it comes from {origin.name}, {origin.area}, which is {origin.blurb}.",
                (m.name, "material", MATERIAL_ORIGIN, origin.name),
                (origin.name, "place", PLACE_KNOWN_FOR, m.name),
            )
        shown = lines[:3]
        page.say(
            f"Product lines made with it include {_join([x.name for x in shown])}.",
            *[(x.name, "line", LINE_MATERIAL, m.name) for x in shown],
        )
        return self._finish(page)

    def place_page(self, place: Place) -> PageDraft:
        page = PageDraft(f"place-{slug(place.name)}", place.name, "place")
        page.say(f"{place.name} is {place.blurb}.")
        if place.area_kind == "province":
            where = f"It lies in the province of {place.area}, in {place.region}."
        elif place.area_kind == "region":
            where = f"It is one of the cities of the {place.area}."
        else:
            where = f"It lies in {place.region}, {place.area}."
        page.say(where, (place.name, "place", PLACE_AREA, place.area))
        known = [
            m
            for m in self.tax.materials
            if m.origin == place.name and m.name in self.lines_by_material
        ]
        if known:
            page.say(
                f"It is known for {_join([m.name for m in known])}.",
                *[(place.name, "place", PLACE_KNOWN_FOR, m.name) for m in known],
            )
        brands = self.brands_by_place.get(place.name, [])[:4]
        if brands:
            page.say(
                f"Brands based here include {_join([b.name for b in brands])}.",
                *[(b.name, "brand", BRAND_HOME_CITY, place.name) for b in brands],
            )
        return self._finish(page)

    def guide_page(self, leaf_index: int) -> PageDraft:
        leaf = self.tax.leaves[leaf_index]
        lines = self.lines_by_leaf[leaf_index][:MAX_GUIDE_LINES]
        page = PageDraft(f"guide-{slug(leaf.name)}", f"Buying guide: {leaf.name}", "guide")
        page.say(f"Shopping for {leaf.name.lower()}? Here are product lines worth a look.")
        for line in lines:
            b = self.world.brands[line.brand]
            page.say(
                f"{_cap(self._line_clause(line))}; {line.brand} is based in {b.home.name}.",
                *self._line_facts(line),
                (b.name, "brand", BRAND_HOME_CITY, b.home.name),
            )
        return self._finish(page)

    def pages(self) -> list[PageDraft]:
        """Brand, line, material, place and guide pages, in release order within each kind."""
        out = [self.brand_page(name) for name in self.notable]
        out += [self.line_page(line) for line in self.world.lines]
        out += [
            self.material_page(m) for m in self.tax.materials if m.name in self.lines_by_material
        ]
        homes = set(self.brands_by_place)
        origins = {
            m.origin
            for m in self.tax.materials
            if m.origin is not None and m.name in self.lines_by_material
        }
        out += [self.place_page(p) for p in self.tax.places if p.name in homes | origins]
        out += [
            self.guide_page(leaf.index)
            for leaf in self.tax.leaves
            if len(self.lines_by_leaf.get(leaf.index, [])) >= 2
        ]
        return out
