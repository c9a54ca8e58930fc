"""The careful shopper asks a clarify request's shopper about exactly what the request holds
back; the presumer never asks; the interrogator asks until the shopper stops answering. All
played through the episode loop on generated clarify tasks."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from shopbench.agents.reference.query_reading import read_held_back, read_query
from shopbench.agents.registry import make_policy
from shopbench.env.env import ShoppingEnv
from shopbench.records.trajectory import Trajectory
from shopbench.tasks.gen_clarify import HINT_FRAMES, hint_sentence
from shopbench.tasks.generate import BuildConfig, build_tasks
from shopbench.tasks.hidden import HiddenCard
from shopbench.tasks.model import Task
from shopbench.tasks.queries import attribute_label
from shopbench.trajectory.loop import run_episode


@pytest.fixture(scope="module")
def tasks(catalog_dir: Path) -> list[Task]:
    return build_tasks(BuildConfig(catalog=catalog_dir, intents=["clarify"], n=16, seed=5)).tasks


def _play(env: ShoppingEnv, tasks: list[Task], name: str) -> list[Trajectory]:
    policy = make_policy(name, seed=0)

    async def play() -> list[Trajectory]:
        return [
            await run_episode(env, t, policy, key=bytes([i + 1]) * 32)
            for i, t in enumerate(tasks)
        ]

    return asyncio.run(play())


def test_every_hint_the_generator_writes_reads_back() -> None:
    rng = random.Random(1)
    keys = ["color_family", "bike_wheel_size_-_dia_inch"]
    card = HiddenCard(price=True, service=True, pairs=keys)
    for _ in range(50):
        sentence = hint_sentence(card, rng)
        held, rest = read_held_back(f"Find me a red mug, under 300 pesos. {sentence}")
        assert held is not None and rest == "Find me a red mug, under 300 pesos."
        assert held.price and held.service
        assert held.labels == tuple(attribute_label(k) for k in card.pairs)
    assert len(HINT_FRAMES) >= 5
    assert read_held_back("Find me a red mug.") == (None, "Find me a red mug.")
    reading = read_query(f"Find me a red mug, under 300 pesos. {sentence}")
    assert reading.items[0].price is not None and reading.items[0].price.hi == 300
    assert reading.held_back is not None


def test_careful_asks_what_is_held_back_and_nothing_else(
    env: ShoppingEnv, tasks: list[Task]
) -> None:
    played = _play(env, tasks, "careful")
    for t, task in zip(played, tasks, strict=True):
        dialogue = t.outcome.dialogue
        assert dialogue is not None and task.hidden is not None
        assert dialogue.asked() == set(task.hidden.topics()), t.messages
        assert dialogue.wasted() == 0
        first_recommend = min(e.turn for e in t.tool_log if e.name == "recommend_product")
        assert dialogue.asked(before_turn=first_recommend) == set(task.hidden.topics())
    assert sum(t.success for t in played) >= 0.75 * len(tasks)


def test_the_presumer_never_asks_and_the_interrogator_asks_to_the_cap(
    env: ShoppingEnv, tasks: list[Task]
) -> None:
    careful = _play(env, tasks, "careful")
    presumer = _play(env, tasks, "presumer")
    interrogator = _play(env, tasks, "interrogator")
    assert all(t.outcome.dialogue is not None for t in presumer)
    assert all(t.outcome.dialogue.questions == 0 for t in presumer)  # type: ignore[union-attr]
    cap = tasks[0].rules.max_questions
    assert all(t.outcome.dialogue.questions == cap for t in interrogator)  # type: ignore[union-attr]
    assert sum(t.success for t in presumer) < sum(t.success for t in careful)
    assert all(
        t.outcome.question_factor < c.outcome.question_factor
        for t, c in zip(interrogator, careful, strict=True)
    )
