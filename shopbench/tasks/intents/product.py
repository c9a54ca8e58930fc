"""The product finder: one product that meets the query's constraints."""

from __future__ import annotations

from shopbench.outcome.spec import GradingRules
from shopbench.tasks.gen_product import draft_product
from shopbench.tasks.intent_registry import IntentSpec, ShoppingBenchForm, TaskShape

SPEC = IntentSpec(
    name="product",
    shape=TaskShape(min_slots=1, max_slots=1),
    draft=draft_product,
    grading=GradingRules(single_pick=True),
    shoppingbench=ShoppingBenchForm(reward="slot"),
)
