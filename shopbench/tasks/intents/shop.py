"""Several products bought from one shop."""

from __future__ import annotations

from shopbench.outcome.spec import GradingRules
from shopbench.tasks.draft import Sampler
from shopbench.tasks.gen_shop import draft_shop
from shopbench.tasks.intent_registry import IntentSpec, ShoppingBenchForm, TaskShape


def shop_support(sampler: Sampler, where: str) -> str | None:
    """Why no shop task can be drawn: no shop has two eligible products."""
    if not sampler.pool.shops_with(2):
        return f"no shop has 2 or more eligible products {where}"
    return None


SPEC = IntentSpec(
    name="shop",
    shape=TaskShape(min_slots=2, max_slots=4),
    draft=draft_shop,
    support=shop_support,
    grading=GradingRules(one_shop=True),
    shoppingbench=ShoppingBenchForm(reward="slots"),
)
