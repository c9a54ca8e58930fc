"""The GRPO reward, in parts TRL logs one by one (``rewards/<name>/mean``).

Each part is a TRL reward function: it receives the rollouts' prompts, completions and
environments (one :class:`~shopbench.distill.rl.environment.ShopbenchEnvironment` per
rollout) and returns one float per rollout; TRL sums them with the config's weights.

* ``outcome`` — the validator's outcome grader on the recommendation: the mean rule score
  over the task's slots, plus ``success_bonus`` when the episode succeeds by ShoppingBench's
  rules. A rollout that recommends the target scores ``1 + success_bonus``; one that
  recommends nothing scores 0.
* ``viewed_slots`` (optional, dense) — from the validator's own tool log: the share of the
  task's slots that a product the agent opened with view_product_information satisfies.
  It rewards finding the right product before the final recommendation is right.
* ``judge`` (optional) — the process judge's score in [0, 1] (:func:`make_judge
  <shopbench.judging.registry.make_judge>`: the rubric judge, or an LLM judge) on the
  rollout as a trajectory, the same record the archive keeps.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from shopbench.chat import ChatMessage, FunctionCall, ToolCall
from shopbench.records.trajectory import TerminationReason, Timings, Trajectory
from shopbench.trajectory.builder import episode_record

if TYPE_CHECKING:
    from shopbench.distill.rl.environment import ShopbenchEnvironment
    from shopbench.judging.judge import Judge

RewardFunc = Callable[..., list[float]]
AGENT = "grpo-rollout"
"""The agent name a rollout's trajectory carries."""


def outcome_reward(success_bonus: float) -> RewardFunc:
    """The ``outcome`` part: mean rule score + `success_bonus` × success."""

    def outcome(environments: Sequence[ShopbenchEnvironment], **_: Any) -> list[float]:
        return [
            e.outcome.mean_rule + (success_bonus if e.outcome.success else 0.0)
            for e in environments
        ]

    return outcome


def viewed_slots_reward() -> RewardFunc:
    """The dense ``viewed_slots`` part (see the module)."""

    def viewed_slots(environments: Sequence[ShopbenchEnvironment], **_: Any) -> list[float]:
        return [e.viewed_slots for e in environments]

    return viewed_slots


def judge_reward(judge: Judge) -> RewardFunc:
    """The ``judge`` part: `judge`'s score of each rollout's trajectory."""

    def judge_score(
        prompts: Sequence[list[dict[str, Any]]],
        completions: Sequence[list[dict[str, Any]]],
        environments: Sequence[ShopbenchEnvironment],
        **_: Any,
    ) -> list[float]:
        return [
            judge.judge(rollout_trajectory(e, [*p, *c])).score
            for p, c, e in zip(prompts, completions, environments, strict=True)
        ]

    judge_score.__name__ = "judge"
    return judge_score


def chat_messages(messages: Sequence[dict[str, Any]]) -> list[ChatMessage]:
    """TRL's conversation (tool calls with dict arguments, tool messages by name) as the
    arena's messages: arguments as JSON text, each tool message bound to its call's id."""
    out: list[ChatMessage] = []
    waiting: list[str] = []
    n = 0
    for m in messages:
        role = m.get("role")
        content = m.get("content")
        text = content if isinstance(content, str) or content is None else json.dumps(content)
        if role == "assistant":
            calls: list[ToolCall] = []
            for call in m.get("tool_calls") or []:
                function = call.get("function", call)
                args = function.get("arguments", {})
                n += 1
                calls.append(
                    ToolCall(
                        id=f"call_{n}",
                        function=FunctionCall(
                            name=str(function.get("name", ""))[:64],
                            arguments=args if isinstance(args, str) else json.dumps(args),
                        ),
                    )
                )
                waiting.append(f"call_{n}")
            out.append(
                ChatMessage(
                    role="assistant", content=text, tool_calls=calls or None,
                    reasoning_content=m.get("reasoning_content") or m.get("thinking"),
                )
            )  # fmt: skip
        elif role == "tool":
            call_id = waiting.pop(0) if waiting else None
            out.append(
                ChatMessage(role="tool", content=text, tool_call_id=call_id, name=m.get("name"))
            )
        elif role in ("system", "user"):
            out.append(ChatMessage(role=role, content=text))
    return out


def rollout_trajectory(env: ShopbenchEnvironment, messages: Sequence[dict[str, Any]]) -> Trajectory:
    """One rollout as the record the arena archives: its messages, the episode's tool log,
    recommendation and outcome. A rollout that did not call terminate ended on its budget
    (TRL's tool-call iterations or completion length), recorded as ``turn_limit``."""
    episode = env.episode
    ended = episode.end_reason == "terminated"
    return episode_record(
        episode, env.task, chat_messages(messages), agent=AGENT, outcome=env.outcome,
        termination=TerminationReason.terminated if ended else TerminationReason.turn_limit,
        timings=Timings(started_at=time.time(), total_ms=0.0, policy_ms=0.0, env_ms=0.0,
                        grade_ms=0.0),
    )  # fmt: skip
