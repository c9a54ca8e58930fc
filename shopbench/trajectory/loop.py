"""The one loop that plays an episode: :func:`run_episode`.

It produces :class:`~shopbench.records.trajectory.Trajectory` records the same way for a
local policy and for a remote miner: the policy sees only the message list and the tool
schemas, the environment runs every tool call, and whatever the policy does wrong — raise,
time out, reply garbage, send no tool call, an unknown tool, broken JSON, an oversized
message — is recorded in the trajectory instead of escaping the loop. The recommendation is
graded by the environment's grader, or by the one passed in; the loop knows no judge.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from shopbench.chat import MAX_TOOL_NAME, ChatMessage
from shopbench.records.trajectory import (
    FailureKind,
    Timings,
    Trajectory,
    TurnFailure,
    TurnTiming,
)
from shopbench.trajectory.builder import episode_record
from shopbench.trajectory.reply import LooseReply, PreparedTurn, nudge, prepare, read_reply, short
from shopbench.trajectory.stops import LoopState, first_stop

if TYPE_CHECKING:
    from shopbench.agents.base import Policy
    from shopbench.env.env import ShoppingEnv
    from shopbench.env.episode import Episode
    from shopbench.records.outcome import Outcome
    from shopbench.tasks.model import Task

Grader = Callable[["Task", Sequence["str | None"]], "Outcome"]
"""Grades a task's recommended catalog ids (None for a token that resolves to nothing)."""

DEFAULT_TURN_TIMEOUT_S = 60.0
"""Seconds a policy may take to answer one turn, unless configured otherwise: the one default
read by :class:`RunLimits`, ``shopbench eval --turn-timeout``, the validator's
``--neuron.turn_timeout_s`` and its miner client, and (less a margin) the miner's own
``--agent.request_timeout_s``."""


class RunLimits(BaseModel):
    """How long a policy may take and how many failures the loop tolerates.

    The environment's own limits (turns, calls per turn, sizes) live in
    :class:`shopbench.chat.EpisodeLimits`; these are the loop's.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    turn_timeout_s: float = Field(
        default=DEFAULT_TURN_TIMEOUT_S,
        gt=0,
        description="seconds the policy may take to answer one turn",
    )
    episode_timeout_s: float | None = Field(
        default=None, gt=0, description="seconds for the whole episode; None: no bound"
    )
    max_policy_failures: int = Field(
        default=1,
        ge=1,
        description="turns on which the policy may raise, time out or reply garbage before "
        "the episode ends; 1 ends it at the first such turn",
    )
    max_idle_turns: int | None = Field(
        default=None,
        ge=1,
        description="consecutive turns without a tool call that ran before the episode ends "
        "as no_progress; None: such turns go on until the turn limit",
    )



async def _ask(
    policy: Policy,
    messages: list[ChatMessage],
    tools: list[dict[str, Any]],
    limits: RunLimits,
    elapsed: float,
) -> tuple[LooseReply | None, tuple[FailureKind, str] | None, float]:
    """One turn asked of the policy: (the reply, or the failure), and the ms it took."""
    timeout = limits.turn_timeout_s
    deadline_bound = False
    if limits.episode_timeout_s is not None:
        left = limits.episode_timeout_s - elapsed
        if left < timeout:
            timeout, deadline_bound = max(left, 0.0), True
    budget = f"the episode's {limits.episode_timeout_s or 0:g} s budget"
    if timeout <= 0:
        return None, ("deadline", f"{budget} is spent"), 0.0
    t0 = time.perf_counter()
    try:
        raw = await asyncio.wait_for(policy.act(list(messages), tools), timeout)
    except TimeoutError as e:
        ms = (time.perf_counter() - t0) * 1000.0
        if str(e):  # the policy's own timeout (e.g. its endpoint's), with its message
            return None, ("policy_timeout", short(f"{type(e).__name__}: {e}")), ms
        if deadline_bound:
            return None, ("deadline", f"{budget} ran out"), ms
        return None, ("policy_timeout", f"no reply within {timeout:g} s"), ms
    except asyncio.CancelledError:
        raise
    except Exception as e:  # any failure of the policy is data, never a crash
        ms = (time.perf_counter() - t0) * 1000.0
        return None, ("policy_error", short(f"{type(e).__name__}: {e}")), ms
    ms = (time.perf_counter() - t0) * 1000.0
    try:
        return read_reply(raw), None, ms
    except ValueError as e:
        return None, ("invalid_reply", short(str(e))), ms


async def _execute(
    prepared: PreparedTurn, episode: Episode, messages: list[ChatMessage]
) -> int:
    """Run the reply's calls through the episode, answering each with a tool message; an
    oversized reply's calls are answered without running. Returns how many ran."""
    refusal = next((t for k, t in prepared.notices if k == "oversized"), None)
    ran = 0
    for call_id, name, args in prepared.calls:
        if refusal is not None:
            content = f"Error: this call was not run: {refusal}"
        else:
            content = (await episode.acall(name, args)).content
            ran += 1
        messages.append(
            ChatMessage(
                role="tool", tool_call_id=call_id, name=name[:MAX_TOOL_NAME], content=content
            )
        )
    return ran


async def run_episode(
    env: ShoppingEnv,
    task: Task,
    policy: Policy,
    limits: RunLimits | None = None,
    *,
    key: bytes | None = None,
    validator_hotkey: str | None = None,
    miner_uid: int | None = None,
    miner_hotkey: str | None = None,
    block: int | None = None,
    grader: Grader | None = None,
) -> Trajectory:
    """Play `task` with `policy` in a new episode of `env` and return its graded record.

    Per turn the policy gets the messages so far (system prompt, the user query, earlier
    turns and tool results) and the tool schemas — never the task — and must not mutate
    them. Each tool call of its reply runs through the episode and is answered by a tool
    message. The loop ends when the agent terminates, the turn limit is reached, or the
    policy fails as often as `limits` allow (raises, times out, replies garbage); turns
    without a tool call get an error message and go on. Never raises for anything the
    policy does; the recommended products are graded by `grader` (default: the
    environment's own, :meth:`ShoppingEnv.grade`).
    `key` fixes the episode's tokens (None draws a fresh one).
    """
    limits = limits or RunLimits()
    started_at = time.time()
    t_start = time.perf_counter()
    episode = env.new_episode(task, key=key)
    tools = episode.tools  # the record's copy; the policy gets a fresh one each turn
    messages: list[ChatMessage] = [
        ChatMessage(role="system", content=episode.system_prompt),
        ChatMessage(role="user", content=task.query),
    ]
    failures: list[TurnFailure] = []
    timings: list[TurnTiming] = []
    used_ids: set[str] = set()
    state = LoopState(episode=episode, limits=limits)

    while (stopped := first_stop(state)) is None:
        episode.begin_turn()
        turn = episode.turn
        elapsed = time.perf_counter() - t_start
        reply, fault, policy_ms = await _ask(policy, messages, episode.tools, limits, elapsed)
        if fault is not None or reply is None:
            kind, text = fault or ("invalid_reply", "no reply")
            failures.append(TurnFailure(turn=turn, kind=kind, detail=text))
            timings.append(TurnTiming(turn=turn, policy_ms=policy_ms, env_ms=0.0))
            state.policy_failures += 1
            state.fault = (kind, text)
            continue
        state.fault = None
        prepared = prepare(reply, turn, episode, used_ids)
        messages.append(prepared.message)
        for kind, text in prepared.notices:
            failures.append(TurnFailure(turn=turn, kind=kind, detail=short(text)))
        t1 = time.perf_counter()
        ran = await _execute(prepared, episode, messages)
        env_ms = (time.perf_counter() - t1) * 1000.0
        timings.append(TurnTiming(turn=turn, policy_ms=policy_ms, env_ms=env_ms))
        if not prepared.calls:
            kind, text = prepared.notices[0] if prepared.notices else ("no_tool_call", "")
            messages.append(ChatMessage(role="user", content=nudge(kind, text, episode)))
        state.idle_turns = 0 if ran else state.idle_turns + 1
    reason, detail = stopped

    t_grade = time.perf_counter()
    ids = [episode.resolve(t) for t in episode.recommended]
    outcome = grader(task, ids) if grader else env.grade(task, ids, episode.dialogue())
    grade_ms = (time.perf_counter() - t_grade) * 1000.0

    return episode_record(
        episode, task, messages, agent=str(getattr(policy, "name", type(policy).__name__)),
        outcome=outcome, termination=reason, detail=detail, failures=failures, tools=tools,
        validator_hotkey=validator_hotkey, miner_uid=miner_uid, miner_hotkey=miner_hotkey,
        block=block,
        timings=Timings(
            started_at=started_at,
            total_ms=(time.perf_counter() - t_start) * 1000.0,
            policy_ms=sum(t.policy_ms for t in timings),
            env_ms=sum(t.env_ms for t in timings),
            grade_ms=grade_ms,
            turns=timings,
        ),
    )  # fmt: skip
