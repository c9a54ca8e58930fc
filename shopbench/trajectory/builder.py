"""The one builder of a :class:`~shopbench.records.trajectory.Trajectory` from a played episode.

The episode loop (:func:`~shopbench.trajectory.loop.run_episode`) and GRPO's rollouts
(:mod:`shopbench.distill.rl.rewards`) both record what an episode was through
:func:`episode_record`, so a rollout and an arena episode carry the same fields from the same
places: the episode's id, tools, tool log, recommendation and token map; the task's ids and
query; the grade.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shopbench.chat import ChatMessage
from shopbench.records.trajectory import (
    TerminationReason,
    Timings,
    ToolLogEntry,
    Trajectory,
    TurnFailure,
)

if TYPE_CHECKING:
    from shopbench.env.episode import Episode
    from shopbench.records.outcome import Outcome
    from shopbench.tasks.model import Task


def tool_log(episode: Episode) -> list[ToolLogEntry]:
    """The episode's own log of calls as the trajectory records it (arguments, digests)."""
    return [
        ToolLogEntry(
            turn=r.turn, name=r.name, arguments=r.arguments, result_digest=r.digest,
            error=r.error, latency_ms=r.latency_ms,
        )
        for r in episode.log
    ]  # fmt: skip


def episode_record(
    episode: Episode,
    task: Task,
    messages: Sequence[ChatMessage],
    *,
    agent: str,
    outcome: Outcome,
    termination: TerminationReason,
    timings: Timings,
    detail: str | None = None,
    failures: Sequence[TurnFailure] = (),
    tools: list[dict[str, object]] | None = None,
    validator_hotkey: str | None = None,
    miner_uid: int | None = None,
    miner_hotkey: str | None = None,
    block: int | None = None,
) -> Trajectory:
    """The record of `episode` played on `task` with `messages`, graded `outcome`, ended by
    `termination` (`tools`: the schemas offered, the episode's own by default)."""
    tokens = episode.recommended
    return Trajectory(
        episode_id=episode.id,
        task_id=task.id,
        cluster=task.cluster,
        validator_hotkey=validator_hotkey,
        miner_uid=miner_uid,
        miner_hotkey=miner_hotkey,
        block=block,
        intent=task.intent,
        query=task.query,
        split=task.split,
        agent=agent,
        system_prompt_version=episode.system_prompt_version,
        tools=tools if tools is not None else episode.tools,
        messages=list(messages),
        tool_log=tool_log(episode),
        failures=list(failures),
        recommended=tokens,
        recommended_ids=[episode.resolve(t) if t else None for t in tokens],
        token_map=episode.token_map(),
        status=episode.status,
        termination=termination,
        termination_detail=detail,
        turns=episode.turn,
        outcome=outcome,
        timings=timings,
    )
