"""A product named by a fact the shopper looks up with ``web_search`` (ShoppingBench's ``web``)."""

from __future__ import annotations

from shopbench.outcome.spec import GradingRules
from shopbench.packs.web_search import PACK as WEB_SEARCH
from shopbench.tasks.draft import Sampler
from shopbench.tasks.gen_knowledge import draft_knowledge, knowledge_support
from shopbench.tasks.intent_registry import IntentSpec, ShoppingBenchForm, TaskShape


def _support(sampler: Sampler, where: str) -> str | None:
    return knowledge_support(sampler)


SPEC = IntentSpec(
    name="knowledge",
    shape=TaskShape(min_slots=1, max_slots=1),
    draft=draft_knowledge,
    support=_support,
    grading=GradingRules(single_pick=True, answer=True),
    packs=(WEB_SEARCH,),
    shoppingbench=ShoppingBenchForm(
        reward="target_record", marker="Knowledge_Attribute", precedence=0, name="web"
    ),
)
