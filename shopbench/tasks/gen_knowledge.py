"""Knowledge tasks: a question the knowledge corpus answers, then a product carrying the answer.

As ShoppingBench's web intent: the grader checks that the hidden answer (the key attribute)
appears in the recommended product's title or description, and that its title matches the
target's at the stricter knowledge threshold. Two kinds of question, both answered by
``web_search`` over the catalog's knowledge pages:

- ``brand``: which brand is based in a city and was founded in a year? The answer is the
  brand; the item is one of its products, named without the brand. Only (city, year) pairs
  that single out one brand of the corpus are asked.
- ``material``: what material is a product line made with? The answer is the material; the
  item is a product of that line whose description states it, named without the material.

The query states no other constraint: a knowledge task is graded on the answer and the title
only.
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Literal

from pydantic import BaseModel, ConfigDict

from shopbench.catalog.schema import Product
from shopbench.outcome.spec import Slot
from shopbench.tasks.describe import PhraseOdds, findable_phrase
from shopbench.tasks.draft import Draft, DraftResult, Rejection, Sampler
from shopbench.tasks.gen_product import finder
from shopbench.tasks.queries import knowledge_question, write_knowledge
from shopbench.tasks.satisfy import with_answer

KnowledgeKind = Literal["brand", "material"]
BRAND_SHARE = 0.6
"""Share of brand questions when both kinds are available."""
_LINE_SEARCH_WINDOW = 50
KNOWLEDGE_PHRASE_ODDS = PhraseOdds(brand=1.0, modifier=0.7, min_modifiers=1, max_modifiers=4)
"""Knowledge items are named more fully: the title is held to 0.8 and the answer is
already left out."""


class Question(BaseModel):
    """One answerable question: its kind, its facts, the answer and what it is about."""

    model_config = ConfigDict(frozen=True)

    kind: KnowledgeKind
    entity: str
    answer: str
    facts: dict[str, str]


def question_bank(s: Sampler) -> dict[KnowledgeKind, list[Question]]:
    """The questions the catalog's knowledge corpus answers unambiguously, brand questions
    only where the brand has an eligible product (cached)."""
    cached: dict[KnowledgeKind, list[Question]] | None = s.memo.get("question_bank")
    if cached is not None:
        return cached
    city: dict[str, str] = {}
    year: dict[str, str] = {}
    material: dict[str, str] = {}
    for page in s.knowledge():
        for f in page.facts:
            if f.entity_kind == "brand" and f.attribute == "home_city":
                city.setdefault(f.entity, f.value)
            elif f.entity_kind == "brand" and f.attribute == "founded_year":
                year.setdefault(f.entity, f.value)
            elif f.entity_kind == "line" and f.attribute == "material":
                material.setdefault(f.entity, f.value)
    by_city: dict[str, list[str]] = defaultdict(list)
    for brand, c in city.items():
        by_city[c.casefold()].append(brand)
    brands: list[Question] = []
    for brand in sorted(year):
        c = city.get(brand)
        if c is None or not len(s.pool.brand_rows(brand)):
            continue  # unknown city, or no eligible product to buy
        # Unambiguous only if every other brand of that city is known to differ in year.
        rivals = [b for b in by_city[c.casefold()] if b != brand]
        if all(b in year and year[b] != year[brand] for b in rivals):
            brands.append(Question(kind="brand", entity=brand, answer=brand,
                                   facts={"city": c, "year": year[brand]}))  # fmt: skip
    lines = [
        Question(kind="material", entity=line, answer=m, facts={"line": line})
        for line, m in sorted(material.items())
    ]
    bank: dict[KnowledgeKind, list[Question]] = {"brand": brands, "material": lines}
    s.memo["question_bank"] = bank
    return bank


def knowledge_support(s: Sampler) -> str | None:
    """Why the catalog cannot give knowledge tasks; None if it may."""
    if not s.knowledge():
        return "the catalog has no knowledge corpus (no facts to ask about)"
    bank = question_bank(s)
    if not bank["brand"] and not bank["material"]:
        return "the knowledge corpus has no unambiguous brand or line-material question"
    return None


def carries(product: Product, text: str) -> bool:
    """Whether the answer appears in the product's title or description, as the grader checks."""
    t = text.lower()
    return t in product.title.lower() or t in product.description.lower()


def _brand_target(s: Sampler, q: Question, rng: random.Random) -> Product | None:
    rows = s.pool.brand_rows(q.entity)
    if not len(rows):
        return None
    p = s.product(int(rows[rng.randrange(len(rows))]))
    return p if p is not None and carries(p, q.answer) else None


def _line_target(s: Sampler, q: Question, rng: random.Random) -> Product | None:
    hits = s.index.search(q.entity, window=_LINE_SEARCH_WINDOW)
    found = [p for p in s.index.get([h.product_id for h in hits]) if p is not None]
    # A product of the line names the line in its description and states the material.
    ok = [
        p
        for p in found
        if s.pool.eligible_group(p.group_key)
        and q.entity.lower() in p.description.lower()
        and carries(p, q.answer)
    ]
    return rng.choice(ok) if ok else None


def draft_knowledge(s: Sampler, rng: random.Random) -> DraftResult:
    """One knowledge task draft, or why the attempt failed."""
    bank = question_bank(s)
    kinds: list[KnowledgeKind] = [k for k in ("brand", "material") if bank[k]]
    if not kinds:
        return Rejection(reason="no unambiguous question in the knowledge corpus")
    kind = kinds[0] if len(kinds) == 1 else ("brand" if rng.random() < BRAND_SHARE else "material")
    q = rng.choice(bank[kind])
    target = _brand_target(s, q, rng) if kind == "brand" else _line_target(s, q, rng)
    if target is None:
        return Rejection(reason=f"no eligible product carries the answer of a {kind} question")
    slot = Slot(product_id=target.product_id, title=[target.title])
    finds = finder(s, slot, target)
    phrase = findable_phrase(
        target.title, rng, lambda words: finds(with_answer(words, q.answer, kind)),
        brand=target.brand, leaf=target.leaf, drop=q.answer, odds=KNOWLEDGE_PHRASE_ODDS,
    )  # fmt: skip
    if q.answer.lower() in phrase.lower():
        return Rejection(reason="the item's name gives the answer away")
    question = knowledge_question(kind, rng, **q.facts)
    return Draft(
        intent="knowledge",
        query=write_knowledge(phrase, question, kind, rng),
        slots=[slot],
        targets=[target],
        knowledge_attribute=q.answer,
        phrases=[phrase],
        meta={
            "knowledge_kind": kind,
            "knowledge_entity": q.entity,
            **{f"knowledge_fact_{k}": v for k, v in sorted(q.facts.items())},
        },
    )
