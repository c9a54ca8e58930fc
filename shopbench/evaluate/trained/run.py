"""A trained model evaluated against a baseline: ``shopbench distill eval``.

Both policies play every task of the file K times through the evaluation runner (the one
episode loop, episode keys from the seed, so the two runs see the same ids); the table
(:mod:`shopbench.evaluate.trained.table`) has each metric with its bootstrap interval,
clustered by the tasks' product groups, the paired difference, and per table the number of
groups and the smallest detectable ASR difference. What could make the figures mean less
than they seem is said in the report: tasks that are not held out, a model endpoint that
serves another model than named, K greedy samples, how many evaluation queries overlap the
training set, and how many of the evaluation's product groups the training calls touched
(refused before any episode with ``forbid_shared_groups``).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from shopbench.agents.local.grammar import GRAMMAR_VERSION, GRAMMARS
from shopbench.agents.options import PolicyOptions, check_applies
from shopbench.agents.registry import API_KEY_VARIABLES, check_spec, make_policy
from shopbench.errors import ShopbenchError
from shopbench.evaluate.errors import ModelEvalError
from shopbench.evaluate.intervals import BootstrapConfig
from shopbench.evaluate.runner import EvalConfig, run_evaluation
from shopbench.evaluate.trained.overlap import (
    DEFAULT_THRESHOLD,
    Contamination,
    GroupOverlap,
    contamination,
    group_overlap,
    training_product_ids,
)
from shopbench.evaluate.trained.table import DifferenceTable, RunTable, difference_table, run_table
from shopbench.openai_compat.spec import OPENAI_PREFIX
from shopbench.records.trajectory import Trajectory
from shopbench.tasks.split import target_groups, task_groups
from shopbench.trajectory.loop import RunLimits

if TYPE_CHECKING:
    from shopbench.catalog.store import Catalog
    from shopbench.env.env import ShoppingEnv
    from shopbench.tasks.model import Task

GROUPS_NAMED = 5
"""Shared product groups an error names; the rest are counted."""


class ModelEvalConfig(BaseModel):
    """What ``distill eval`` runs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(description="the evaluated policy: hf:PATH or openai:MODEL@URL")
    baseline: str | None = Field(default=None, description="the policy compared against")
    samples: int = Field(default=1, ge=1, description="episodes per task (K of pass@K)")
    concurrency: int = Field(default=8, ge=1, description="episodes played at once")
    seed: int = Field(default=0, description="seed of the episode keys and the sampling")
    policy_options: PolicyOptions = Field(
        default_factory=PolicyOptions, description="options of the model policies (decoding, "
        "timeouts, template arguments); a turn timeout set here replaces the limits' own",
    )  # fmt: skip
    limits: RunLimits = Field(default_factory=RunLimits, description="the loop's limits")
    expect_split: str = Field(
        default="heldout", description="the split the tasks should be from; others warned"
    )
    training_set: Path | None = Field(
        default=None, description="the model's training data, for the contamination line"
    )
    threshold: float = Field(
        default=DEFAULT_THRESHOLD, gt=0, le=1, description="contamination containment threshold"
    )
    forbid_shared_groups: bool = Field(
        default=False, description="refuse to run, before any episode, when the training "
        "set's tool calls touch a product group of the evaluation's targets (else a warning)",
    )  # fmt: skip
    bootstrap: BootstrapConfig = Field(
        default_factory=BootstrapConfig, description="the intervals"
    )


class ModelEvalReport(BaseModel):
    """``report.json`` of ``distill eval``."""

    model_config = ConfigDict(frozen=True)

    tasks_file: str
    tasks: int
    samples: int
    seed: int
    max_turns: int | None = Field(default=None, description="assistant turns an episode")
    max_idle_turns: int | None = Field(
        default=None, description="turns without a tool call that ran before an episode ends"
    )
    max_tokens: int | None = Field(default=None, description="tokens a turn (None: the policy's)")
    decoding: str | None = Field(
        default=None, description="how a local model decoded its calls (None: free)"
    )
    grammar: int | None = Field(
        default=None, description="the revision of the grammar constrained calls were decoded "
        "under (shopbench.agents.local.grammar.GRAMMAR_VERSION); None when free",
    )  # fmt: skip
    splits: dict[str, int]
    level: float = Field(description="confidence level of every interval")
    resamples: int
    model: RunTable
    baseline: RunTable | None = None
    difference: DifferenceTable | None = Field(
        default=None, description="model − baseline, paired over tasks"
    )
    contamination: Contamination | None = None
    group_overlap: GroupOverlap | None = Field(
        default=None, description="the evaluation's product groups the training set touched"
    )
    warnings: list[str] = Field(default_factory=list)
    seconds: dict[str, float] = Field(description="wall time of each run")
    resumed: dict[str, int] = Field(
        default_factory=dict,
        description="episodes of each run an interrupted run had played (not in its seconds)",
    )


def split_warnings(tasks: Sequence[Task], expect: str) -> list[str]:
    """A warning for the tasks that are not of the `expect` split."""
    splits = Counter(t.split for t in tasks)
    other = {s: n for s, n in splits.items() if s != expect}
    if not other:
        return []
    said = ", ".join(f"{n} {s}" for s, n in sorted(other.items()))
    live = " (live tasks: their product groups can be in the arena's training traces)" if (
        "live" in other
    ) else ""
    return [f"{sum(other.values())} of {len(tasks)} tasks are not {expect}: {said}{live}"]


async def _served(spec: str) -> list[str]:
    from shopbench.agents.openai_policy import OpenAIPolicyConfig
    from shopbench.agents.registry import parse_openai_spec
    from shopbench.openai_compat.client import OpenAIClient
    from shopbench.openai_compat.keys import api_key_from_env

    model, url = parse_openai_spec(spec)
    settings = OpenAIPolicyConfig(model=model, base_url=url, retries=0, request_timeout_s=30)
    client = OpenAIClient(settings.client_config(1))
    try:
        body = await client.models(url, api_key=api_key_from_env(API_KEY_VARIABLES))
    finally:
        await client.aclose()
    data = body.get("data") if isinstance(body, dict) else None
    return [m["id"] for m in data or [] if isinstance(m, dict) and isinstance(m.get("id"), str)]


def check_endpoint(spec: str) -> list[str]:
    """For ``openai:MODEL@URL``: ModelEvalError when the server lists its models and MODEL
    is not one of them; a warning when it cannot list them. Nothing for other specs."""
    if not spec.strip().startswith(OPENAI_PREFIX):
        return []
    from shopbench.agents.registry import parse_openai_spec

    model = parse_openai_spec(spec.strip())[0]
    try:
        served = asyncio.run(_served(spec.strip()))
    except ShopbenchError as e:
        return [f"{spec}: could not list the served models ({e}); the name is unchecked"]
    if served and model not in served:
        raise ModelEvalError(
            f"{spec}: the server serves {', '.join(served)}, not {model!r}; name the model it "
            "serves, or point at the server that serves it"
        )
    return [] if served else [f"{spec}: the server lists no models; the name is unchecked"]


def check_groups(
    tasks: Sequence[Task], training_set: Path, catalog: Catalog, *, forbid: bool
) -> GroupOverlap:
    """The overlap of the tasks' target groups with the groups of the products the training
    set's tool calls name; ModelEvalError naming the count and a few groups when any is
    shared and `forbid` is set."""
    groups, _ = target_groups(tasks, catalog)
    overlap = group_overlap(groups, training_product_ids(training_set), catalog)
    if forbid and overlap.shared_count:
        named = ", ".join(overlap.shared[:GROUPS_NAMED])
        more = overlap.shared_count - min(GROUPS_NAMED, len(overlap.shared))
        raise ModelEvalError(
            f"{training_set}: {overlap.shared_count} product groups of the evaluation's "
            f"targets are in the training set's tool calls ({named}"
            + (f" and {more} more" if more else "") + "); evaluate on groups it never "
            "touched, or drop forbid_shared_groups"
        )
    return overlap


def _play(
    env: ShoppingEnv, tasks: Sequence[Task], spec: str, config: ModelEvalConfig,
    on_done: Callable[[Trajectory], None] | None, played: Sequence[Trajectory] = (),
) -> tuple[list[Trajectory], float]:
    chosen = config.policy_options
    limits = config.limits
    if chosen.turn_timeout_s is not None:
        limits = limits.model_copy(update={"turn_timeout_s": chosen.turn_timeout_s})
    run = EvalConfig(
        samples=config.samples, concurrency=config.concurrency, seed=config.seed,
        limits=limits,
    )  # fmt: skip

    def make(k: int):  # type: ignore[no-untyped-def]
        options = chosen.options(spec, config.samples, sample=k - config.seed)
        return make_policy(spec, catalog=env.catalog, seed=k, **options)

    return run_evaluation(env, tasks, make, run, on_done=on_done, played=played)


def evaluate_model(
    env: ShoppingEnv,
    tasks: Sequence[Task],
    config: ModelEvalConfig,
    *,
    tasks_file: str = "",
    on_done: Callable[[str, Trajectory], None] | None = None,
    played: Mapping[str, Sequence[Trajectory]] | None = None,
) -> tuple[ModelEvalReport, list[Trajectory], list[Trajectory]]:
    """Play the model (and the baseline) on `tasks`; the report and both runs' trajectories.

    `on_done(spec, trajectory)` is called as each episode finishes (progress bars, a
    journal); `played[spec]`: the episodes of that spec an interrupted run finished, not
    played again."""
    specs = [config.model] + ([config.baseline] if config.baseline else [])
    warnings: list[str] = []
    check_applies(config.policy_options, specs)
    for spec in specs:
        check_spec(spec)
        warnings += check_endpoint(spec)
    warnings += split_warnings(tasks, config.expect_split)
    if config.samples > 1 and config.policy_options.temperature == 0:
        warnings.append(
            f"{config.samples} samples at temperature 0 are one greedy answer repeated: "
            f"pass@{config.samples} equals pass@1"
        )
    line = None
    shared: GroupOverlap | None = None
    if config.training_set is not None:
        line = contamination(
            [(t.id, t.query) for t in tasks], config.training_set,
            threshold=config.threshold,
        )  # fmt: skip
        if line.overlapping:
            warnings.append(line.line())
        shared = check_groups(
            tasks, config.training_set, env.catalog, forbid=config.forbid_shared_groups
        )
        if shared.shared_count:
            warnings.append(shared.line())
    runs: dict[str, tuple[list[Trajectory], float]] = {}
    resumed: dict[str, int] = {}
    for spec in specs:
        done = (lambda t, s=spec: on_done(s, t)) if on_done is not None else None
        before = (played or {}).get(spec, ())
        started = time.perf_counter()
        trajectories, _ = _play(env, tasks, spec, config, done, before)
        runs[spec] = (trajectories, time.perf_counter() - started)
        kept = {t.episode_id for t in before}
        if kept:
            resumed[spec] = sum(1 for t in trajectories if t.episode_id in kept)
    boot = config.bootstrap
    groups = task_groups(tasks, env.catalog)
    model_ts = runs[config.model][0]
    base_ts = runs[config.baseline][0] if config.baseline else []
    report = ModelEvalReport(
        tasks_file=tasks_file,
        tasks=len(tasks),
        samples=config.samples,
        seed=config.seed,
        max_turns=env.limits.max_turns,
        max_idle_turns=config.limits.max_idle_turns,
        max_tokens=config.policy_options.max_tokens,
        decoding=config.policy_options.decoding,
        grammar=GRAMMAR_VERSION if config.policy_options.decoding in GRAMMARS else None,
        splits=dict(Counter(t.split for t in tasks)),
        level=boot.level,
        resamples=boot.resamples,
        model=run_table(
            model_ts, policy=config.model, samples=config.samples, boot=boot, groups=groups
        ),
        baseline=(
            run_table(
                base_ts, policy=config.baseline, samples=config.samples, boot=boot,
                groups=groups,
            ) if config.baseline else None
        ),  # fmt: skip
        difference=(
            difference_table(model_ts, base_ts, config.samples, boot, groups)
            if config.baseline else None
        ),
        contamination=line,
        group_overlap=shared,
        warnings=warnings,
        seconds={spec: round(s, 3) for spec, (_, s) in runs.items()},
        resumed=resumed,
    )
    return report, model_ts, base_ts
