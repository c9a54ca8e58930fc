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
