"""The evaluation harness: every task played K times by a policy, episodes in parallel.

Each episode goes through :func:`shopbench.trajectory.loop.run_episode`, the one episode loop,
so an evaluated policy is treated exactly as a miner is. Episode keys are derived from
(seed, task id, sample), so a rerun with the same seed shows the agent the same ids; sample
k of every task is played by the policy made with seed ``seed + k`` (reference policies
vary their wording by seed; model policies vary by sampling).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from shopbench.env.episode import episode_id
from shopbench.evaluate.errors import EvalError
from shopbench.records.trajectory import Trajectory
from shopbench.trajectory.loop import RunLimits, run_episode

if TYPE_CHECKING:
    from shopbench.agents.base import Policy
    from shopbench.env.env import ShoppingEnv
    from shopbench.tasks.model import Task

PolicyFactory = Callable[[int], "Policy"]
"""Makes the policy that plays sample k (called once per sample index)."""


class EvalConfig(BaseModel):
    """How an evaluation runs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    samples: int = Field(default=1, ge=1, description="episodes per task (K of pass@k)")
    concurrency: int = Field(default=8, ge=1, description="episodes played at once")
    seed: int = Field(default=0, description="seed of the episode keys and of the policies")
    limits: RunLimits = Field(default_factory=RunLimits, description="the loop's limits")


def episode_key(seed: int, task_id: str, sample: int) -> bytes:
    """The episode key of sample `sample` of task `task_id` in an evaluation with `seed`."""
    return hashlib.sha256(f"shopbench-eval:{seed}:{task_id}:{sample}".encode()).digest()


async def evaluate(
    env: ShoppingEnv,
    tasks: Sequence[Task],
    make: PolicyFactory,
    config: EvalConfig | None = None,
    *,
    on_done: Callable[[Trajectory], None] | None = None,
    played: Sequence[Trajectory] = (),
) -> list[Trajectory]:
    """Play every task `config.samples` times; return the trajectories in (task, sample)
    order, whatever order they finished in.

    At most `config.concurrency` episodes run at once; `on_done` is called with each
    trajectory as it finishes (progress bars, streaming writes). `played`: episodes an
    earlier, interrupted run of the same evaluation finished (the same seed), found by their
    episode id (each (task, sample) has its own key) and not played again. Policy failures
    are in the trajectories; an unexpected error of the environment propagates.
    """
    config = config or EvalConfig()
    if not tasks:
        raise EvalError("no tasks to evaluate")
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise EvalError(f"task id {dup!r} appears more than once; pass@k needs unique ids")
    policies = [make(config.seed + k) for k in range(config.samples)]
    gate = asyncio.Semaphore(config.concurrency)
    slots: list[Trajectory | None] = [None] * (len(tasks) * config.samples)
    earlier = {t.episode_id: t for t in played}
    for i, task in enumerate(tasks):
        for k in range(config.samples):
            slots[i * config.samples + k] = earlier.get(
                episode_id(episode_key(config.seed, task.id, k))
            )

    async def play(i: int, task: Task, k: int) -> None:
        async with gate:
            t = await run_episode(
                env, task, policies[k], config.limits, key=episode_key(config.seed, task.id, k)
            )
        slots[i * config.samples + k] = t
        if on_done is not None:
            on_done(t)

    jobs = [
        asyncio.create_task(play(i, task, k))
        for i, task in enumerate(tasks)
        for k in range(config.samples)
        if slots[i * config.samples + k] is None
    ]
    try:
        await asyncio.gather(*jobs)
    finally:
        for job in jobs:
            job.cancel()
        for p in policies:
            close = getattr(p, "aclose", None)
            if close is not None:
                await close()
    return [t for t in slots if t is not None]


def run_evaluation(
    env: ShoppingEnv,
    tasks: Sequence[Task],
    make: PolicyFactory,
    config: EvalConfig | None = None,
    *,
    on_done: Callable[[Trajectory], None] | None = None,
    played: Sequence[Trajectory] = (),
) -> tuple[list[Trajectory], float]:
    """:func:`evaluate` from synchronous code; returns the trajectories and the seconds."""
    start = time.perf_counter()
    out = asyncio.run(evaluate(env, tasks, make, config, on_done=on_done, played=played))
    return out, time.perf_counter() - start
