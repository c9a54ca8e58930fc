"""Clarify tasks in GRPO's environments: their rows route to the clarify environment, whose
``ask_shopper`` is the arena's tool, and whose outcome carries the question cost."""

from __future__ import annotations

from pathlib import Path

import pytest

from shopbench.distill.errors import RLDataError
from shopbench.distill.rl.environment import ClarifyEnvironment, ShopbenchEnvironment, shared_env
from shopbench.distill.rl.rows import build_rows
from shopbench.tasks.generate import BuildConfig, build_tasks


def test_clarify_tasks_play_in_the_environment_with_ask_shopper(catalog_dir: Path) -> None:
    built = build_tasks(BuildConfig(catalog=catalog_dir, intents=["clarify"], n=1, seed=3))
    [row] = build_rows(built.tasks, shared_env(catalog_dir), seed=0)
    assert row["environment"] == "clarify"
    assert ClarifyEnvironment.tool_names() == list(shared_env(catalog_dir).tool_specs("clarify"))
    env = ClarifyEnvironment(catalog_dir)
    env.reset(**row)
    card = built.tasks[0].hidden
    assert card is not None
    answer = env.ask_shopper(question="Which product id is it?")
    assert "can't" in answer or "won't" in answer
    assert env.outcome.dialogue is not None and env.outcome.dialogue.questions == 1
    assert env.outcome.question_factor == pytest.approx(1 - built.tasks[0].rules.question_cost)
    with pytest.raises(RLDataError, match="plays product, shop, voucher tasks"):
        ShopbenchEnvironment(catalog_dir).reset(**row)
