"""The rubric's two clarify checks read the validator's log of the shopper: the careful
shopper passes both, the presumer fails "asked before assuming", the interrogator "asked
only what mattered"; the episode scores rank them careful, interrogator, presumer."""

from __future__ import annotations

import asyncio
from pathlib import Path
from statistics import mean

import pytest

from shopbench.agents.registry import make_policy
from shopbench.env.env import ShoppingEnv
from shopbench.judging.llm.facts import facts_text
from shopbench.judging.rubric.judge import RubricJudge
from shopbench.records.trajectory import Trajectory
from shopbench.scoring.score import with_judgement
from shopbench.tasks.generate import BuildConfig, build_tasks
from shopbench.tasks.model import Task
from shopbench.trajectory.loop import run_episode


@pytest.fixture(scope="module")
def tasks(catalog_dir: Path) -> list[Task]:
    return build_tasks(BuildConfig(catalog=catalog_dir, intents=["clarify"], n=10, seed=8)).tasks


def _scored(env: ShoppingEnv, tasks: list[Task], name: str) -> list[Trajectory]:
    policy = make_policy(name, seed=0)
    judge = RubricJudge()

    async def play() -> list[Trajectory]:
        return [
            await run_episode(env, t, policy, key=bytes([i + 7]) * 32)
            for i, t in enumerate(tasks)
        ]

    return [with_judgement(t, judge.judge(t)) for t in asyncio.run(play())]


def test_the_asking_checks_tell_the_three_shoppers_apart(
    env: ShoppingEnv, tasks: list[Task]
) -> None:
    careful = _scored(env, tasks, "careful")
    presumer = _scored(env, tasks, "presumer")
    interrogator = _scored(env, tasks, "interrogator")
    for t in careful:
        assert t.judge is not None
        assert t.judge.gates["asked_before_assuming"] and t.judge.gates["asked_only_what_mattered"]
    for t in presumer:
        assert t.judge is not None and not t.judge.gates["asked_before_assuming"]
        assert t.judge.gates["asked_only_what_mattered"]
    for t in interrogator:
        assert t.judge is not None and t.judge.gates["asked_before_assuming"]
        assert t.outcome.dialogue is not None
        wasted = t.outcome.dialogue.wasted()
        assert t.judge.gates["asked_only_what_mattered"] == (wasted <= 1), t.judge.rationale
    assert sum(not t.judge.gates["asked_only_what_mattered"] for t in interrogator if t.judge) \
        >= len(tasks) // 2
    scores = {n: mean(t.score or 0.0 for t in ts) for n, ts in
              (("careful", careful), ("presumer", presumer), ("interrogator", interrogator))}
    assert scores["careful"] > scores["interrogator"] > scores["presumer"], scores


def test_the_checks_pass_on_tasks_without_a_shopper(env: ShoppingEnv, catalog_dir: Path) -> None:
    product = build_tasks(BuildConfig(catalog=catalog_dir, intents=["product"], n=2, seed=8)).tasks
    for t in _scored(env, product, "careful"):
        assert t.outcome.dialogue is None and t.judge is not None
        assert t.judge.gates["asked_before_assuming"] and t.judge.gates["asked_only_what_mattered"]


def test_the_llm_judge_is_told_what_was_held_back_and_asked(
    env: ShoppingEnv, tasks: list[Task]
) -> None:
    judge = RubricJudge()
    for name, asked in (("careful", True), ("presumer", False)):
        t = _scored(env, tasks[:1], name)[0]
        ev = judge.evidence(t)
        text = facts_text(ev.decisions, t.outcome, ev.recommend_turn)
        hidden = tasks[0].hidden.topics()  # type: ignore[union-attr]
        assert f"held back (the shopper answers ask_shopper about them): {', '.join(hidden)}" \
            in text
        said = "never asked: none" if asked else f"never asked: {', '.join(hidden)}"
        assert said in text, text
        for key in tasks[0].hidden.pairs:  # type: ignore[union-attr]
            assert f"pair:{key}" in text  # the topic, never its value
