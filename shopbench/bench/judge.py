"""Benchmark of the rubric judge: trajectories judged per second on one core.

Plays `episodes` real episodes through ``run_episode`` — every reference policy in turn
(honest, lazy and cheating ones, so the mix of short and long trajectories is realistic) —
on tasks from a file or, without one, on product tasks drawn from the catalog's own
products. Then judges them round after round for at least `seconds` of CPU time and
reports throughput against CPU time (one core: the judge is single-threaded), against wall
time (which other load on the machine inflates), and for the fastest pass.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from shopbench.agents.registry import POLICY_NAMES, make_policy
from shopbench.env.env import ShoppingEnv
from shopbench.judging.rubric.judge import RubricJudge
from shopbench.outcome.spec import PriceBound, Slot
from shopbench.records.trajectory import Trajectory
from shopbench.tasks.io import read_tasks
from shopbench.tasks.model import Task
from shopbench.tasks.queries import product_phrase
from shopbench.trajectory.loop import run_episode


def _catalog_tasks(env: ShoppingEnv, n: int, rng: random.Random) -> list[Task]:
    """`n` product tasks: a catalog product's phrase and a budget just above its price."""
    pool = []
    for batch in env.catalog.iter_products(batch_size=5000):
        pool.extend(batch)
        if len(pool) >= 10 * n:
            break
    tasks = []
    for i, p in enumerate(rng.sample(pool, min(n, len(pool)))):
        budget = int(p.price * 1.2) + 10
        tasks.append(
            Task(
                id=f"bench-judge-{i}",
                intent="product",
                query=f"I'm looking for {product_phrase(p.title)}, under {budget} pesos.",
                reward=[Slot(product_id=p.product_id, title=[p.title],
                             price=[PriceBound(mode="less than", hi=float(budget))])],
            )
        )
    return tasks


async def _play(env: ShoppingEnv, tasks: list[Task], episodes: int, seed: int) -> list[Trajectory]:
    policies = {name: make_policy(name, catalog=env.catalog, seed=seed) for name in POLICY_NAMES}
    out = []
    for i in range(episodes):
        task = tasks[i % len(tasks)]
        name = POLICY_NAMES[i % len(POLICY_NAMES)]
        key = hashlib.sha256(f"bench-judge:{seed}:{i}".encode()).digest()
        out.append(await run_episode(env, task, policies[name], key=key))
    return out


class JudgeBenchConfig(BaseModel):
    """What to measure."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    catalog: Path = Field(description="catalog directory")
    tasks: Path | None = Field(
        default=None, description="task file (default: product tasks drawn from the catalog)"
    )
    episodes: int = Field(default=100, ge=1, description="episodes to play")
    seconds: float = Field(default=3.0, ge=0.1, description="CPU seconds to judge")
    seed: int = Field(default=0, description="seed of the tasks, keys and policies")


def run(
    catalog_dir: str | Path,
    *,
    tasks: str | Path | None = None,
    episodes: int = 100,
    seconds: float = 3.0,
    seed: int = 0,
) -> dict[str, Any]:
    """Play the episodes, judge them for at least `seconds` of CPU time, and measure."""
    env = ShoppingEnv.open(catalog_dir)
    rng = random.Random(seed)
    task_list = read_tasks(tasks).tasks if tasks else _catalog_tasks(env, episodes, rng)
    trajectories = asyncio.run(_play(env, task_list, episodes, seed))
    judge = RubricJudge()
    judge.judge(trajectories[0])  # warm the caches and the regexes once
    judged = 0
    rounds: list[float] = []  # CPU seconds of each pass over all trajectories
    cpu0, wall0 = time.process_time(), time.perf_counter()
    while time.process_time() - cpu0 < seconds:
        start = time.process_time()
        for t in trajectories:
            judge.judge(t)
        rounds.append(time.process_time() - start)
        judged += len(trajectories)
    cpu = time.process_time() - cpu0
    wall = time.perf_counter() - wall0
    sizes = [len(t.model_dump_json()) for t in trajectories]
    return {
        "products": len(env.catalog),
        "episodes": len(trajectories),
        "judged": judged,
        "trajectories_per_s_cpu": judged / cpu if cpu else 0.0,
        "trajectories_per_s_wall": judged / wall if wall else 0.0,
        # The fastest pass: what one core does when other load on the machine lets it.
        "trajectories_per_s_best_pass": len(trajectories) / min(rounds) if min(rounds) else 0.0,
        "mean_turns": sum(t.turns for t in trajectories) / len(trajectories),
        "mean_record_kb": sum(sizes) / len(sizes) / 1024,
        "max_record_kb": max(sizes) / 1024,
        "judge_id": judge.judge_id,
    }
