"""Benchmark of `shopbench verify`: archived episodes replayed and re-graded per second.

Plays `episodes` real episodes through ``run_episode`` — every reference policy in turn, one
miner per policy — on tasks from a file or generated from the catalog (every intent), judges
and scores each policy's episodes as one round with the validator's own function
(``score_round``), then verifies them (replay of every tool call, the outcome graded again,
the rubric, the combined score, the episode score, the round's factors) again and again for
at least `seconds` of wall time. The records are verified from memory: reading them from
shards (about 1,700 episodes/s, docs/archive.md) is not counted.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from shopbench.agents.registry import POLICY_NAMES, make_policy
from shopbench.env.env import ShoppingEnv
from shopbench.judging.rubric.judge import RubricJudge
from shopbench.records.task import INTENTS
from shopbench.records.trajectory import Trajectory
from shopbench.scoring.combine import Judgement
from shopbench.scoring.consensus import ConsensusConfig
from shopbench.scoring.round import score_round
from shopbench.tasks.model import Task
from shopbench.trajectory.loop import run_episode
from shopbench.verify.run import TaskIndex, verify_records


def _tasks(catalog_dir: str | Path, tasks: str | Path | None, n: int, seed: int) -> list[Task]:
    if tasks is not None:
        from shopbench.tasks.io import read_tasks

        return list(read_tasks(tasks).tasks)
    from shopbench.tasks.generate import BuildConfig, build_tasks

    per_intent = max(1, math.ceil(n / len(INTENTS)))
    config = BuildConfig(catalog=Path(catalog_dir), intents=list(INTENTS), n=per_intent, seed=seed)
    return list(build_tasks(config).tasks)


async def _play(env: ShoppingEnv, tasks: list[Task], episodes: int, seed: int) -> list[Trajectory]:
    policies = {name: make_policy(name, catalog=env.catalog, seed=seed) for name in POLICY_NAMES}
    out = []
    for i in range(episodes):
        name = POLICY_NAMES[i % len(POLICY_NAMES)]
        task = tasks[(i // len(POLICY_NAMES)) % len(tasks)]
        key = hashlib.sha256(f"bench-verify:{seed}:{i}".encode()).digest()
        uid = 2 + POLICY_NAMES.index(name)
        out.append(await run_episode(env, task, policies[name], key=key, miner_uid=uid, block=1))
    return out


def _scored(trajectories: list[Trajectory]) -> list[Trajectory]:
    """Each miner's episodes judged and scored as one round, as the validator does."""
    consensus, judge = ConsensusConfig(), RubricJudge()
    by_miner: dict[int, list[Trajectory]] = {}
    for t in trajectories:
        by_miner.setdefault(t.miner_uid or 0, []).append(t)
    out: list[Trajectory] = []
    for uid, mine in by_miner.items():
        judged = [Judgement(rubric=judge.judge(t)) for t in mine]
        out.extend(score_round(str(uid), mine, judged, consensus).trajectories)
    return out


class VerifyBenchConfig(BaseModel):
    """What to measure."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    catalog: Path = Field(description="catalog directory")
    tasks: Path | None = Field(
        default=None, description="task file (default: tasks generated from the catalog)"
    )
    episodes: int = Field(default=64, ge=1, description="episodes to play and archive")
    seconds: float = Field(default=3.0, ge=0.1, description="wall seconds to verify")
    seed: int = Field(default=0, description="seed of the tasks, keys and policies")


def run(
    catalog_dir: str | Path,
    *,
    tasks: str | Path | None = None,
    episodes: int = 64,
    seconds: float = 3.0,
    seed: int = 0,
) -> dict[str, Any]:
    """Play, judge and score the episodes, verify them for at least `seconds`, and measure."""
    env = ShoppingEnv.open(catalog_dir)
    task_list = _tasks(catalog_dir, tasks, math.ceil(episodes / len(POLICY_NAMES)), seed)
    records = _scored(asyncio.run(_play(env, task_list, episodes, seed)))
    index = TaskIndex(task_list)
    first = verify_records(records, env, index)  # warms the caches (the knowledge index, ...)
    verified, passes = 0, []
    cpu0, wall0 = time.process_time(), time.perf_counter()
    while time.perf_counter() - wall0 < seconds:
        start = time.perf_counter()
        report = verify_records(records, env, index)
        passes.append(time.perf_counter() - start)
        verified += report.episodes
    cpu = time.process_time() - cpu0
    wall = time.perf_counter() - wall0
    return {
        "products": len(env.catalog),
        "episodes": len(records),
        "verified": verified,
        "mismatches": len(first.mismatches),
        "rounds_checked": first.rounds_checked,
        "episodes_per_s_wall": verified / wall if wall else 0.0,
        "episodes_per_s_cpu": verified / cpu if cpu else 0.0,
        "episodes_per_s_best_pass": len(records) / min(passes) if min(passes) else 0.0,
        "mean_tool_calls": sum(len(t.tool_log) for t in records) / len(records),
        "mean_turns": sum(t.turns for t in records) / len(records),
    }
