"""Verify replays a clarify episode's shopper: under the episode's key, and on the record's
token map under another key, every answer comes back with the digest the record holds, and
the outcome (its dialogue and question cost included) is the record's; an altered answer
is found."""

from __future__ import annotations

import asyncio
from pathlib import Path

from shopbench.agents.registry import make_policy
from shopbench.env.env import ShoppingEnv
from shopbench.records.binding import result_digest
from shopbench.tasks.generate import BuildConfig, build_tasks
from shopbench.trajectory.loop import run_episode
from shopbench.verify.replay import replay_differences, replay_episode


def test_the_shoppers_answers_replay(env: ShoppingEnv, catalog_dir: Path) -> None:
    tasks = build_tasks(BuildConfig(catalog=catalog_dir, intents=["clarify"], n=3, seed=4)).tasks
    for i, task in enumerate(tasks):
        key = bytes([i + 40]) * 32
        record = asyncio.run(run_episode(env, task, make_policy("interrogator"), key=key))
        assert record.outcome.dialogue is not None and record.outcome.dialogue.questions > 0
        for replayed in (replay_episode(env, task, record, key), replay_episode(env, task, record)):
            assert list(replay_differences(record, replayed)) == []
        asked = next(n for n, e in enumerate(record.tool_log) if e.name == "ask_shopper")
        forged = record.model_copy(update={"tool_log": [
            e.model_copy(update={"result_digest": result_digest("I want the cheapest one.")})
            if n == asked else e for n, e in enumerate(record.tool_log)
        ]})  # fmt: skip
        found = list(replay_differences(forged, replay_episode(env, task, forged)))
        assert [f[0] for f in found] == [f"tool_log[{asked}].result_digest"]


def test_a_record_played_under_the_previous_prompt_replays_under_it(
    env: ShoppingEnv, catalog_dir: Path
) -> None:
    assert env.prompt_version == "v2" and "ask_shopper is offered" in env.system_prompt
    old = env.with_prompt("v1")
    assert "ask_shopper" not in old.system_prompt and env.with_prompt("v1") is old
    task = build_tasks(BuildConfig(catalog=catalog_dir, intents=["product"], n=1, seed=4)).tasks[0]
    record = asyncio.run(run_episode(old, task, make_policy("careful"), key=b"v" * 32))
    assert record.system_prompt_version == "v1"
    assert list(replay_differences(record, replay_episode(env, task, record))) == []
    claimed = record.model_copy(update={"system_prompt_version": "v99"})
    found = {f[0] for f in replay_differences(claimed, replay_episode(env, task, claimed))}
    assert found == {"system_prompt_version", "messages[system].content"}
