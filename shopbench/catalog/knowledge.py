"""The knowledge corpus: pages about brands, product lines, materials and places.

Knowledge tasks ask an agent to look something up and then shop with it: "Which city is the
Kalibo Trail brand from? Buy me a backpack from a brand based there." The grader then checks
that the hidden value ("Cebu City") appears in the recommended product's title or
description. So the corpus and the catalog agree by construction:

- every fact is about the seed's world model (`gen_world.py`), which depends on the seed
  alone, so a seed's corpus is the same whatever the catalog size;
- every product a fact is about states the fact's value in its description: a brand's home
  city, area and founding year on all its products; a line's brand, material and signature
  feature on all the line's products; a material's origin and property on the products of
  the lines made with it; a place's area on the products of brands based there;
- the generator puts every product line on sale at the start of the catalog, so in any
  catalog of more than about a thousand products every fact's value is on some product;
- values narrow the catalog: a city hosts a few dozen of the ~800 brands, a signature
  feature belongs to a few lines, a notable material only to the lines built on it.

Fact attributes: brand `home_city`, `home_area`, `founded_year`; line `brand`, `material`,
`signature_feature`; material `origin`, `property`; place `area`, `known_for`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from shopbench.catalog.gen_pages import (
    BRAND_FOUNDED,
    BRAND_HOME_AREA,
    BRAND_HOME_CITY,
    LINE_BRAND,
    LINE_FEATURE,
    LINE_MATERIAL,
    MATERIAL_ORIGIN,
    MATERIAL_PROPERTY,
    PLACE_AREA,
    PLACE_KNOWN_FOR,
    PageWriter,
)
from shopbench.catalog.gen_world import build_brand_world
from shopbench.catalog.generator import GeneratorConfig
from shopbench.catalog.taxonomy import load_taxonomy

EntityKind = Literal["brand", "line", "material", "place"]
FACT_ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "brand": (BRAND_HOME_CITY, BRAND_HOME_AREA, BRAND_FOUNDED),
    "line": (LINE_BRAND, LINE_MATERIAL, LINE_FEATURE),
    "material": (MATERIAL_ORIGIN, MATERIAL_PROPERTY),
    "place": (PLACE_AREA, PLACE_KNOWN_FOR),
}

__all__ = ["FACT_ATTRIBUTES", "EntityKind", "Fact", "KnowledgePage", "generate_knowledge"]


class Fact(BaseModel):
    """One (entity, attribute, value) statement a page makes; true of the catalog's products."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    entity: str = Field(min_length=1, description="brand, line, material or place name")
    entity_kind: EntityKind
    attribute: str = Field(min_length=1, description="see FACT_ATTRIBUTES")
    value: str = Field(
        min_length=1, description="appears in the descriptions of the products it is about"
    )


class KnowledgePage(BaseModel):
    """A short encyclopedic or shopping-guide page and the facts it states."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    page_id: str = Field(min_length=1, description="stable id, e.g. 'brand-ulla-art-supply'")
    title: str = Field(min_length=1)
    text: str = Field(min_length=1, description="80-400 words of prose")
    facts: list[Fact] = Field(description="every fact the text states, distractors included")


def generate_knowledge(cfg: GeneratorConfig) -> list[KnowledgePage]:
    """The knowledge corpus of cfg.seed, deterministic and independent of cfg.n_products.

    Pages come in a fixed order (brands, lines, materials, places, buying guides); page ids
    are unique; each page's facts are deduplicated in order of first mention.
    """
    writer = PageWriter(load_taxonomy(), build_brand_world(cfg.seed), cfg.seed)
    pages = []
    for draft in writer.pages():
        facts = [
            Fact(entity=e, entity_kind=k, attribute=a, value=v)  # type: ignore[arg-type]
            for e, k, a, v in dict.fromkeys(draft.facts)
        ]
        pages.append(
            KnowledgePage(page_id=draft.page_id, title=draft.title, text=draft.text(), facts=facts)
        )
    return pages
