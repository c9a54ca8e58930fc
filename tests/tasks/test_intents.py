"""Intents as declared units: one registry, and every list of intents derived from it."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import get_args

import pytest
from pydantic import ValidationError

from shopbench.catalog.store import Catalog
from shopbench.distill.rl.environment import ENVIRONMENTS, environment_for, plays
from shopbench.env.env import ShoppingEnv
from shopbench.outcome.spec import GradingRules, Slot
from shopbench.records.diagnosis import ONE_SHOP_INTENTS
from shopbench.records.task import INTENTS, Intent
from shopbench.tasks.draft import DraftResult, Rejection, Sampler
from shopbench.tasks.errors import TaskError
from shopbench.tasks.generate import BuildConfig, build_tasks
from shopbench.tasks.intent_registry import (
    IntentSpec,
    ShoppingBenchForm,
    TaskShape,
    intent_names,
    intent_specs,
    register,
    unregister,
)
from shopbench.tasks.model import Task
from shopbench.tasks.shoppingbench_format import infer_intent, intent_name


def test_the_registry_names_exactly_the_wire_vocabulary() -> None:
    assert intent_names() == get_args(Intent) == INTENTS


def test_the_floor_reads_the_one_shop_rule_the_intents_declare() -> None:
    assert {s.name for s in intent_specs() if s.grading.one_shop} == ONE_SHOP_INTENTS


def test_every_intent_has_one_rl_environment() -> None:
    played = [name for env in ENVIRONMENTS.values() for name in plays(env)]
    assert sorted(played) == sorted(intent_names())
    assert environment_for("knowledge") == "knowledge" and environment_for("shop") == "shopping"


def test_a_task_shape_is_checked_against_its_intent() -> None:
    slot = Slot(title=["red mug"])
    with pytest.raises(ValidationError, match="a shop task has 2-4 slots, got 1"):
        Task(id="t", intent="shop", query="q", reward=[slot])
    with pytest.raises(ValidationError, match="a knowledge task needs its knowledge_attribute"):
        Task(id="t", intent="knowledge", query="q", reward=[slot])
    task = Task(id="t", intent="knowledge", query="q", reward=[slot], knowledge_attribute="oak")
    assert task.rules == GradingRules(single_pick=True, answer=True)


# -- a toy fifth intent, declared here and nowhere else --------------------------------------

DRAFTED: list[int] = []


def _draft_gift(sampler: Sampler, rng: random.Random) -> DraftResult:
    DRAFTED.append(len(sampler.pool))
    return Rejection(reason="gift: no gift wrapping in this catalog")


GIFT = IntentSpec(
    name="gift",
    shape=TaskShape(min_slots=1, max_slots=2),
    draft=_draft_gift,
    grading=GradingRules(single_pick=True),
    shoppingbench=ShoppingBenchForm(reward="slots", marker="gift_note", precedence=2,
                                    name="present"),
)  # fmt: skip


@pytest.fixture
def gift() -> Iterator[IntentSpec]:
    register(GIFT)
    try:
        yield GIFT
    finally:
        unregister(GIFT.name)


def test_a_registered_intent_flows_through_generation(catalog_dir: Path, gift: IntentSpec) -> None:
    assert intent_names()[-1] == "gift"
    DRAFTED.clear()
    built = build_tasks(BuildConfig(catalog=catalog_dir, intents=["product", "gift"], n=2,
                                    seed=1, max_attempts=3))  # fmt: skip
    product, toy = built.reports
    assert product.intent == "product" and product.produced == 2
    assert toy.intent == "gift" and toy.produced == 0 and toy.attempts == 6
    assert toy.rejections == {"gift: no gift wrapping in this catalog": 6}
    assert toy.unsupported is not None and "gift: no gift wrapping" in toy.unsupported
    assert len(DRAFTED) == 6 and DRAFTED[0] > 0
    assert all(t.intent == "product" for t in built.tasks)


def test_a_registered_intent_flows_through_the_names_tools_and_formats(
    catalog: Catalog, gift: IntentSpec
) -> None:
    assert str(intent_name("present")) == "gift" and str(intent_name("Gift")) == "gift"
    allowed = "allowed: product, shop, voucher, knowledge, clarify, gift, web"
    with pytest.raises(TaskError, match=allowed):
        intent_name("bogus")
    assert str(infer_intent({"query": "q", "reward": [], "gift_note": "hi"})) == "gift"
    assert infer_intent({"query": "q", "reward": [], "voucher": {}}) == "voucher"
    assert "web_search" not in ShoppingEnv(catalog).tool_specs("gift")
    assert environment_for("gift") == "shopping"
    assert "gift" in plays(ENVIRONMENTS["shopping"])
    # A task, like the signed record it becomes, takes only the wire vocabulary's names.
    gift_task = {"id": "t", "intent": "gift", "query": "q", "reward": [{"title": ["mug"]}]}
    with pytest.raises(ValidationError, match="intent"):
        Task.model_validate(gift_task)


def test_an_intent_is_registered_once(gift: IntentSpec) -> None:
    with pytest.raises(TaskError, match="'gift' is already registered"):
        register(GIFT)
    with pytest.raises(TaskError, match="not a registered add-on"):
        unregister("shop")
    with pytest.raises(ValidationError, match="unknown intent 'parcel'"):
        BuildConfig(catalog=Path("."), intents=["parcel"], n=1, seed=1)
