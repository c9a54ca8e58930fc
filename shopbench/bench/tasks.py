"""Task generation benchmark: validated tasks per second on a catalog.

Builds `n` tasks per intent with the real pipeline (drafting, grading the targets,
findability, satisfying sets, split) on `workers` processes and reports the wall time,
including opening the catalog and reading the sampling pool in every worker. The target is
10,000 validated tasks from a 1M-product catalog in at most 2 minutes.
"""

from __future__ import annotations

import resource
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from shopbench.catalog.layout import read_manifest
from shopbench.records.task import INTENTS, Intent
from shopbench.tasks.generate import BuildConfig, build_tasks
from shopbench.tasks.phrase_search import SATISFY_WINDOW
from shopbench.tasks.stats import task_stats


class TaskBenchConfig(BaseModel):
    """What to measure."""

    model_config = ConfigDict(extra="forbid")

    catalog: Path = Field(description="catalog directory")
    n: int = Field(default=2500, ge=1, description="tasks per intent")
    intents: list[Intent] = Field(
        default_factory=lambda: list(INTENTS),
        description="intents to build",
    )
    workers: int = Field(default=2, ge=1, description="worker processes")
    seed: int = Field(default=0, description="sampling seed")
    window: int = Field(
        default=SATISFY_WINDOW, ge=50, description="search results examined per slot"
    )


class TaskBenchResult(BaseModel):
    """The figures `shopbench bench tasks` prints."""

    products: int
    workers: int
    window: int
    requested: int
    produced: int
    per_intent: dict[str, int]
    drafts: int = Field(description="drafts tried (produced + rejected)")
    seconds: float = Field(description="wall time of the whole build")
    cpu_seconds: float = Field(
        description="CPU time of this process and its workers together; on an idle machine "
        "with W cores the wall time approaches cpu_seconds / W"
    )
    tasks_per_s: float
    seconds_per_10k: float = Field(description="seconds for 10,000 tasks at this rate")
    mean_satisfying: dict[str, float | None] = Field(description="per slot, per intent")


def _cpu() -> float:
    """CPU seconds used so far by this process and its finished children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def run(cfg: TaskBenchConfig) -> TaskBenchResult:
    """Build the tasks once and time it."""
    manifest = read_manifest(cfg.catalog)
    build = BuildConfig(
        catalog=cfg.catalog,
        intents=cfg.intents,
        n=cfg.n,
        seed=cfg.seed,
        workers=cfg.workers,
        satisfy_window=cfg.window,
    )
    t0 = time.perf_counter()
    c0 = _cpu()
    result = build_tasks(build)
    seconds = time.perf_counter() - t0
    cpu = _cpu() - c0
    produced = len(result.tasks)
    stats = task_stats(result.tasks)
    rate = produced / seconds if seconds > 0 else 0.0
    return TaskBenchResult(
        products=manifest.n_products,
        workers=cfg.workers,
        window=cfg.window,
        requested=cfg.n * len(cfg.intents),
        produced=produced,
        per_intent={r.intent: r.produced for r in result.reports},
        drafts=sum(r.attempts for r in result.reports),
        seconds=round(seconds, 2),
        cpu_seconds=round(cpu, 2),
        tasks_per_s=round(rate, 1),
        seconds_per_10k=round(10_000 / rate, 1) if rate else float("inf"),
        mean_satisfying={k: v.mean_satisfying for k, v in stats.intents.items()},
    )
