"""Benchmark of the episode loop with a local policy: episodes per second, end to end.

Plays `episodes` episodes (the task file's tasks in order, cycled) through
:func:`shopbench.evaluate.runner.evaluate` — environment, policy, grading, trajectory — and
reports episodes and tool calls per second, and where the time went (policy, environment,
grading) from the trajectories' own timings. The target: the ``careful`` policy at ≥ 20
episodes/s on a 50k-product catalog, so that the environment is never the bottleneck when
the agent is a model.
"""

from __future__ import annotations

import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from shopbench.agents.registry import make_policy
from shopbench.env.env import ShoppingEnv
from shopbench.evaluate.errors import EvalError
from shopbench.evaluate.runner import EvalConfig, run_evaluation
from shopbench.tasks.io import read_tasks


class EvalBenchConfig(BaseModel):
    """What to measure."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    catalog: Path = Field(description="catalog directory")
    tasks: Path = Field(description="task file")
    policy: str = Field(default="careful", description="a reference policy name")
    episodes: int = Field(default=200, ge=1, description="episodes to play")
    concurrency: int = Field(default=8, ge=1, description="episodes at once")
    seed: int = Field(default=0, description="seed of the episode keys and the policy")


class EvalBenchResult(BaseModel):
    """The measurement."""

    model_config = ConfigDict(frozen=True)

    policy: str
    catalog_products: int
    episodes: int
    seconds: float
    episodes_per_s: float
    cpu_seconds: float = Field(description="CPU time of this process over the run")
    episodes_per_cpu_s: float = Field(
        description="episodes per CPU-second: the rate on an idle core, whatever else runs"
    )
    tool_calls_per_s: float
    mean_turns: float
    mean_tool_calls: float
    env_share: float = Field(description="share of the wall time spent running tool calls")
    grade_share: float = Field(description="share of the wall time spent grading")
    policy_share: float = Field(
        description="the rest of the wall time: the policy and the loop around it"
    )
    open_seconds: float
    asr: float


def run(cfg: EvalBenchConfig) -> EvalBenchResult:
    """Play the episodes and measure them (one process, one event loop)."""
    t0 = time.perf_counter()
    env = ShoppingEnv.open(cfg.catalog)
    open_seconds = time.perf_counter() - t0
    pool = read_tasks(cfg.tasks).tasks
    if not pool:
        raise EvalError(f"{cfg.tasks}: no valid tasks")
    tasks = []
    for i in range(cfg.episodes):
        task = pool[i % len(pool)]
        if i >= len(pool):  # a cycled task needs its own id: pass@k counts ids
            task = task.model_copy(update={"id": f"{task.id}#{i // len(pool)}"})
        tasks.append(task)
    # Warm the shared structures (index readers, knowledge index) outside the timing.
    run_evaluation(env, tasks[: min(4, len(tasks))],
                   lambda k: make_policy(cfg.policy, catalog=env.catalog, seed=k))
    cpu0 = time.process_time()
    trajectories, seconds = run_evaluation(
        env, tasks, lambda k: make_policy(cfg.policy, catalog=env.catalog, seed=k),
        EvalConfig(samples=1, concurrency=cfg.concurrency, seed=cfg.seed),
    )
    cpu = time.process_time() - cpu0
    n = len(trajectories)
    calls = sum(t.tool_calls for t in trajectories)
    # Local policies and the environment both run on the event loop's thread, one at a time,
    # so their summed times are shares of the wall time.
    wall_ms = seconds * 1000.0
    env_share = sum(t.timings.env_ms for t in trajectories) / wall_ms
    grade_share = sum(t.timings.grade_ms for t in trajectories) / wall_ms
    return EvalBenchResult(
        policy=cfg.policy,
        catalog_products=len(env.catalog),
        episodes=n,
        seconds=round(seconds, 3),
        episodes_per_s=round(n / seconds, 2),
        cpu_seconds=round(cpu, 3),
        episodes_per_cpu_s=round(n / cpu, 2) if cpu > 0 else 0.0,
        tool_calls_per_s=round(calls / seconds, 1),
        mean_turns=round(sum(t.turns for t in trajectories) / n, 2),
        mean_tool_calls=round(calls / n, 2),
        env_share=round(env_share, 3),
        grade_share=round(grade_share, 3),
        policy_share=round(max(0.0, 1.0 - env_share - grade_share), 3),
        open_seconds=round(open_seconds, 3),
        asr=round(sum(t.success for t in trajectories) / n, 4),
    )
