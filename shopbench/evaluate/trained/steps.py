"""Step accuracy: the next action a model takes where a reference episode took one.

ASR needs whole episodes to succeed and moves late; a small model learns the protocol step
by step long before. So beside ASR: on held-out episodes of an honest reference policy,
each reference turn's context (what the policy had read before it acted) is given to the
model, teacher-forced, and its one next turn is compared with the reference's:

- ``parses``: the turn holds a tool call the reader parses;
- ``right_tool``: its first call is the tool the reference called first;
- ``valid_arguments``: the environment, replayed to that point, runs the call without a
  ``bad_argument`` or ``unknown_tool`` refusal;
- ``ids_shown``: of the calls that name products, those whose ids were all shown earlier in
  the episode (no ``invalid_id`` refusal);
- ``right_pick``: of the reference's recommendations, those the model makes too, the same
  products in the same order.

Every rate comes with a bootstrap interval clustered by the task's product group, like the
evaluation's. The replay reproduces the reference's tokens from the key it was played with,
so an id the model copies from the context means what it meant there.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from shopbench.agents.base import Policy
from shopbench.chat import AssistantMessage, read_arguments
from shopbench.env.env import ShoppingEnv
from shopbench.evaluate.intervals import BootstrapConfig, Estimate, bootstrap
from shopbench.records.decisions import product_ids
from shopbench.records.tools import Tool
from shopbench.records.trajectory import Trajectory
from shopbench.tasks.model import Task
from shopbench.trajectory.loop import run_episode

METRICS = ("parses", "right_tool", "valid_arguments", "ids_shown", "right_pick")
_ARGUMENT_ERRORS = frozenset({"bad_argument", "unknown_tool"})
_RECOMMEND = Tool.RECOMMEND_PRODUCT


def reference_key(task_id: str, seed: int) -> bytes:
    """The episode key a reference episode of `task_id` is played with (so it replays)."""
    return hashlib.sha256(f"shopbench/steps|{seed}|{task_id}".encode()).digest()


async def play_references(
    env: ShoppingEnv, tasks: Sequence[Task], policy: Policy, seed: int
) -> list[Trajectory]:
    """The reference policy's episode of each task, each under its :func:`reference_key`."""
    return list(await asyncio.gather(*(
        run_episode(env, t, policy, key=reference_key(t.id, seed)) for t in tasks
    )))  # fmt: skip


class Step(BaseModel):
    """One teacher-forced step and how the model's turn compared."""

    model_config = ConfigDict(extra="forbid")

    episode_id: str
    task_id: str
    turn: int = Field(description="the reference's assistant turn (1-based)")
    reference_tool: str
    tool: str | None = Field(description="the model's first call's tool, None if none")
    error: str | None = Field(default=None, description="the replayed call's error code")
    checks: dict[str, bool] = Field(description="metric → passed, for the metrics that apply")


class StepReport(BaseModel):
    """Every metric over the steps it applies to, with its interval."""

    model_config = ConfigDict(extra="forbid")

    episodes: int
    steps: int
    counts: dict[str, int] = Field(description="metric → steps it applies to")
    metrics: dict[str, Estimate]


def _first_call(reply: AssistantMessage) -> tuple[str, str] | None:
    calls = reply.tool_calls or []
    return (calls[0].function.name, calls[0].function.arguments) if calls else None


def _ids(arguments: str) -> list[str] | None:
    args, _ = read_arguments(arguments)
    value = (args or {}).get("product_ids")
    return None if value is None else product_ids(value)


def judge_step(
    env: ShoppingEnv, task: Task, reference: Trajectory, turn: int, reply: AssistantMessage,
    seed: int,
) -> Step:
    """Compare the model's `reply` at reference turn `turn` with the reference's: replay the
    reference's calls before that turn in a fresh episode under its key, then run the
    model's first call there."""
    entries = [e for e in reference.tool_log if e.turn == turn]
    reference_tool = entries[0].name if entries else ""
    first = _first_call(reply)
    checks: dict[str, bool] = {"parses": first is not None, "right_tool": False}
    step = Step(
        episode_id=reference.episode_id, task_id=reference.task_id, turn=turn,
        reference_tool=reference_tool, tool=first[0] if first else None, checks=checks,
    )  # fmt: skip
    if reference_tool == _RECOMMEND:
        checks["right_pick"] = False
    if first is None:
        return step
    name, arguments = first
    checks["right_tool"] = name == reference_tool
    episode = env.new_episode(task, key=reference_key(task.id, seed))
    for entry in reference.tool_log:
        if entry.turn >= turn:
            break
        while episode.turn < entry.turn and episode.begin_turn():
            pass
        episode.call(entry.name, entry.arguments)
    while episode.turn < turn and episode.begin_turn():
        pass
    observation = episode.call(name, arguments)
    step.error = observation.error
    checks["valid_arguments"] = observation.error not in _ARGUMENT_ERRORS
    if _ids(arguments) is not None:
        checks["ids_shown"] = observation.error != "invalid_id"
    if reference_tool == _RECOMMEND:
        mine = [episode.resolve(t) for t in (_ids(arguments) or [])]
        theirs = [p or "" for p in reference.recommended_ids]
        checks["right_pick"] = name == _RECOMMEND and observation.error is None and (
            [p or "" for p in mine] == theirs
        )  # fmt: skip
    return step


async def step_accuracy(
    env: ShoppingEnv, tasks: Sequence[Task], references: Sequence[Trajectory], policy: Policy,
    *, seed: int, groups: dict[str, str], concurrency: int = 16,
    on_step: Callable[[Step], None] | None = None, boot: BootstrapConfig | None = None,
) -> tuple[StepReport, list[Step]]:
    """Every reference turn of `references` given to `policy` teacher-forced; the report
    (intervals clustered by `groups`: task id → product group) and each step."""
    by_id = {t.id: t for t in tasks}
    gate = asyncio.Semaphore(concurrency)
    jobs: list[tuple[Trajectory, int, Any]] = []
    for ref in references:
        turn = 0
        for i, m in enumerate(ref.messages):
            if m.role != "assistant":
                continue
            turn += 1
            if m.tool_calls:
                jobs.append((ref, turn, ref.messages[:i]))

    async def one(ref: Trajectory, turn: int, context: Any) -> Step:
        async with gate:
            try:
                reply = await policy.act(list(context), list(ref.tools))
            except Exception:  # noqa: BLE001 - a failed turn is a step that did not parse
                reply = AssistantMessage()
        step = await asyncio.to_thread(judge_step, env, by_id[ref.task_id], ref, turn, reply,
                                       seed)  # fmt: skip
        if on_step is not None:
            on_step(step)
        return step

    steps = list(await asyncio.gather(*(one(r, n, c) for r, n, c in jobs)))
    return summarize_steps(steps, groups, len(references), boot), steps


def summarize_steps(
    steps: Sequence[Step], groups: dict[str, str], episodes: int,
    boot: BootstrapConfig | None = None,
) -> StepReport:
    """Each metric's rate over the steps it applies to, its interval clustered by the
    steps' tasks' product groups."""
    metrics: dict[str, Estimate] = {}
    counts: dict[str, int] = {}
    for name in METRICS:
        applied = [s for s in steps if name in s.checks]
        counts[name] = len(applied)
        if applied:
            metrics[name] = bootstrap(
                [float(s.checks[name]) for s in applied], [1.0] * len(applied), boot,
                clusters=[groups.get(s.task_id, s.task_id) for s in applied],
            )  # fmt: skip
    return StepReport(episodes=episodes, steps=len(steps), counts=counts, metrics=metrics)
