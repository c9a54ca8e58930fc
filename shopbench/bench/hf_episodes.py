"""Benchmark of whole episodes played by an ``hf:`` model: what keeping each episode's keys
and values across turns saves, in each observation view.

The same product tasks are played by the same model, greedily, several episodes at once
(the batcher's way), once per (view, kept keys and values) setting, in one run: episodes/s,
generated tokens, and the prompt tokens each setting prefilled against those it reused.
The outputs of a setting with the keys and values kept equal those without (the bench says
whether they did), so the settings differ in work alone. A view with a history window
rewrites earlier turns (their results become stubs), so each turn's prompt continues the
last one only up to the first rewritten turn; an append-only view (``compact``, no window)
continues it whole.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from shopbench.errors import ShopbenchError
from shopbench.records.trajectory import Trajectory

if TYPE_CHECKING:
    from shopbench.tasks.model import Task


class EpisodesBenchConfig(BaseModel):
    """What to measure."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: Path = Field(description="the model directory to play (hf:PATH's PATH)")
    catalog: Path = Field(description="the catalog the tasks are played on")
    tasks: Path = Field(description="a task file (product tasks are taken from it)")
    episodes: int = Field(default=16, ge=1, description="episodes played per setting")
    views: list[str] = Field(
        default_factory=lambda: ["compact/h1/brief", "compact/tools"],
        description="observation views to play in (repeat)",
        json_schema_extra={"flag": "view"},
    )
    max_turns: int = Field(default=6, ge=1, description="assistant turns an episode")
    max_tokens: int = Field(default=128, ge=1, description="tokens generated a turn")
    max_idle_turns: int = Field(
        default=2, ge=1, description="turns in a row without a tool call that ran"
    )
    concurrency: int = Field(default=8, ge=1, description="episodes played at once")
    kv_tokens: int = Field(
        default=200_000, ge=1, description="tokens of keys and values kept, when kept"
    )
    threads: int | None = Field(default=None, ge=1, description="torch threads")


class PlayedFigure(BaseModel):
    """What one setting's play of the episodes took."""

    episodes: int
    turns: int
    seconds: float
    episodes_per_s: float
    new_tokens: int


class EpisodesFigure(PlayedFigure):
    """One setting's figures."""

    view: str
    kept: bool = Field(description="keys and values kept across turns")
    prompt_tokens: int = Field(description="prompt tokens of every turn, as the model reads it")
    reused_tokens: int = Field(description="of those, served from kept keys and values")
    same_as_not_kept: bool | None = Field(
        default=None, description="every turn equals the setting without kept keys and values"
    )


class EpisodesBenchResult(BaseModel):
    """The measurement."""

    model: str
    threads: int
    figures: list[EpisodesFigure]


async def play_episodes(
    env: Any, tasks: list[Task], policy: Any, limits: Any, concurrency: int
) -> list[Trajectory]:
    """Play each task once with `policy`, `concurrency` at a time, each episode keyed by its
    place in `tasks` so that every setting of a bench plays the same episodes."""
    from shopbench.trajectory.loop import run_episode

    gate = asyncio.Semaphore(concurrency)

    async def one(i: int) -> Trajectory:
        async with gate:
            return await run_episode(env, tasks[i], policy, limits,
                                     key=bytes([i % 251 + 1]) * 32)  # fmt: skip

    return list(await asyncio.gather(*(one(i) for i in range(len(tasks)))))


def product_tasks(path: Path, n: int) -> list[Task]:
    """The first `n` product tasks of a task file; ShopbenchError when it has none."""
    from shopbench.tasks.io import read_tasks

    tasks = [t for t in read_tasks(path).tasks if t.intent == "product"][:n]
    if not tasks:
        raise ShopbenchError(f"{path}: no product task to play")
    return tasks


def run(cfg: EpisodesBenchConfig) -> EpisodesBenchResult:
    """Play the episodes in every setting; the figures."""
    import torch

    from shopbench.agents.format.views import ObservationView, apply_view, view_tools
    from shopbench.agents.local.config import HFPolicyConfig
    from shopbench.agents.local.engine import HFEngine
    from shopbench.agents.local.policy import HFPolicy
    from shopbench.chat import EpisodeLimits
    from shopbench.env.env import ShoppingEnv
    from shopbench.trajectory.loop import RunLimits

    tasks = product_tasks(cfg.tasks, cfg.episodes)
    env = ShoppingEnv.open(cfg.catalog, EpisodeLimits(max_turns=cfg.max_turns))
    if cfg.threads is not None:
        torch.set_num_threads(cfg.threads)
    figures: list[EpisodesFigure] = []
    limits = RunLimits(max_idle_turns=cfg.max_idle_turns)

    for view in cfg.views:
        shown = ObservationView.from_id(view)
        without: list[Trajectory] = []
        for kept in (False, True):
            engine = HFEngine(cfg.model, kv_tokens=cfg.kv_tokens if kept else 0)
            policy = HFPolicy(
                HFPolicyConfig(path=cfg.model, max_new_tokens=cfg.max_tokens, view=view,
                               max_batch=cfg.concurrency),
                engine=engine,
            )  # fmt: skip
            start = time.perf_counter()
            runs = asyncio.run(play_episodes(env, tasks, policy, limits, cfg.concurrency))
            seconds = time.perf_counter() - start
            prompts = sum(
                len(engine.encode(apply_view(t.messages[:i], shown, t.tools),
                                  view_tools(t.tools, shown)))
                for t in runs for i, m in enumerate(t.messages) if m.role == "assistant"
            )  # fmt: skip
            figures.append(EpisodesFigure(
                view=view, kept=kept, episodes=len(runs), turns=sum(t.turns for t in runs),
                seconds=round(seconds, 2), episodes_per_s=round(len(runs) / seconds, 4),
                new_tokens=engine.stats.new_tokens, prompt_tokens=prompts,
                reused_tokens=engine.stats.cached_prompt_tokens,
                same_as_not_kept=(
                    [t.messages for t in runs] == [t.messages for t in without] if kept else None
                ),
            ))  # fmt: skip
            without = runs
    return EpisodesBenchResult(
        model=str(cfg.model), threads=torch.get_num_threads(), figures=figures
    )
