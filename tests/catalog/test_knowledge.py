"""The knowledge corpus: page shape, determinism, and agreement with the catalog."""

from __future__ import annotations

import re
from collections import defaultdict

import pytest

from shopbench.catalog.generator import GeneratorConfig, generate_products
from shopbench.catalog.knowledge import FACT_ATTRIBUTES, Fact, KnowledgePage, generate_knowledge

SEED = 7
CFG = GeneratorConfig(seed=SEED, n_products=4000, chunk_size=1500)
LINE_SENTENCE = re.compile(r"Part of the (.+?) line\.")
MATERIAL_SENTENCE = re.compile(r"Made with (.+?)(?: from [^:]+)?: ")


@pytest.fixture(scope="module")
def pages() -> list[KnowledgePage]:
    return generate_knowledge(CFG)


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return [r for chunk in generate_products(CFG) for r in chunk]


def _facts(pages: list[KnowledgePage]) -> list[Fact]:
    return list(dict.fromkeys(f for p in pages for f in p.facts))


def _text(r: dict) -> str:
    return f"{r['title']} {r['description']}"


def test_pages_are_short_prose_with_typed_facts(pages: list[KnowledgePage]) -> None:
    assert len(pages) >= 300
    assert len({p.page_id for p in pages}) == len(pages)
    kinds = {p.page_id.split("-", 1)[0] for p in pages}
    assert kinds == {"brand", "line", "material", "place", "guide"}
    for p in pages:
        assert 80 <= len(p.text.split()) <= 400, p.page_id
        assert p.facts, p.page_id
        for f in p.facts:
            assert f.attribute in FACT_ATTRIBUTES[f.entity_kind]
            # the page says what it claims: entity and value both appear in its text
            assert f.value.lower() in p.text.lower(), (p.page_id, f)
            assert f.entity.lower() in p.text.lower(), (p.page_id, f)


def test_pages_carry_distractor_facts(pages: list[KnowledgePage]) -> None:
    brand_pages = [p for p in pages if p.page_id.startswith("brand-")]
    with_rival = [
        p for p in brand_pages if len({f.entity for f in p.facts if f.entity_kind == "brand"}) > 1
    ]
    assert len(with_rival) >= 0.5 * len(brand_pages)


def test_facts_are_consistent_across_pages(pages: list[KnowledgePage]) -> None:
    seen: dict[tuple[str, str], str] = {}
    for f in _facts(pages):
        if f.attribute == "known_for":  # a place can be known for several materials
            continue
        key = (f.entity, f.attribute)
        assert seen.setdefault(key, f.value) == f.value, key


def test_corpus_depends_on_the_seed_alone(pages: list[KnowledgePage]) -> None:
    assert generate_knowledge(GeneratorConfig(seed=SEED, n_products=1)) == pages
    assert generate_knowledge(GeneratorConfig(seed=SEED, n_products=2_500_000)) == pages
    other = generate_knowledge(GeneratorConfig(seed=SEED + 1, n_products=1))
    homes = {(f.entity, f.value) for f in _facts(pages) if f.attribute == "home_city"}
    other_homes = {(f.entity, f.value) for f in _facts(other) if f.attribute == "home_city"}
    assert homes != other_homes


def test_every_fact_value_is_in_some_product_description(
    pages: list[KnowledgePage], rows: list[dict]
) -> None:
    descriptions = [r["description"] for r in rows]
    missing = [f for f in _facts(pages) if not any(f.value in d for d in descriptions)]
    assert missing == []


def test_products_state_the_facts_about_them(pages: list[KnowledgePage], rows: list[dict]) -> None:
    by_entity: dict[str, list[Fact]] = defaultdict(list)
    for f in _facts(pages):
        by_entity[f.entity].append(f)
    checked: dict[str, int] = defaultdict(int)
    for r in rows:
        about = list(by_entity.get(r["brand"], []))  # brand facts: every product of the brand
        line = LINE_SENTENCE.search(r["description"])
        if line:
            about += by_entity[line.group(1)]
        material = MATERIAL_SENTENCE.search(r["description"])
        if material:
            about += by_entity[material.group(1)]
            # the material is an attribute too, so attribute filters find it
            assert [material.group(1)] in r["attributes"].values()
        for f in about:
            assert f.value in _text(r), (r["product_id"], f)
            checked[f.entity_kind] += 1
    assert min(checked[k] for k in ("brand", "line", "material")) > 100


def test_line_products_exist_for_every_line(pages: list[KnowledgePage], rows: list[dict]) -> None:
    lines = {f.entity for f in _facts(pages) if f.entity_kind == "line"}
    on_sale = {
        name for name in lines if any(f"Part of the {name} line." in r["description"] for r in rows)
    }
    assert on_sale == lines


def test_answer_values_narrow_the_catalog(pages: list[KnowledgePage], rows: list[dict]) -> None:
    facts = _facts(pages)
    n = len(rows)
    for attribute, limit in (("home_city", 0.12), ("signature_feature", 0.03)):
        values = {f.value for f in facts if f.attribute == attribute}
        for v in values:
            share = sum(v in r["description"] for r in rows) / n
            assert share <= limit, (attribute, v, share)


def test_a_knowledge_task_can_be_answered_from_page_and_catalog(
    pages: list[KnowledgePage], rows: list[dict]
) -> None:
    # "Which city is <brand> from? Buy me a <leaf item> from a brand based there."
    page = next(p for p in pages if p.page_id.startswith("brand-"))
    home = next(f for f in page.facts if f.entity == page.title and f.attribute == "home_city")
    leaf = next(r["category"] for r in rows if r["brand"] == page.title)
    answers = [r for r in rows if r["category"] == leaf and home.value in _text(r)]
    assert answers
    assert any(r["brand"] == page.title for r in answers)
