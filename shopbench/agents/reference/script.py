"""Reference policies as scripts replayed from the conversation.

A reference policy is written as a generator — a script — that yields one :class:`Step`
per turn (reasoning plus tool calls) and receives that turn's results. It never stores
anything between turns: each :meth:`ScriptedPolicy.act` reads the conversation back, replays
the script from its start feeding it the recorded results, and answers with the first step
the conversation has not seen yet. So the script sees only what a model would (the query,
the tool schemas, the tool results), one policy object serves any number of concurrent
episodes, and the same seed and conversation always give the same turn.

Randomness comes from a generator seeded with (policy name, seed, query): replay draws
the same numbers in the same order, whatever the call order across episodes.
"""

from __future__ import annotations

import json
import random
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from shopbench.agents.messages import AssistantMessage, ChatMessage, FunctionCall, ToolCall
from shopbench.agents.reference.observations import CallResult, Conversation, read_conversation


@dataclass(slots=True)
class Step:
    """One turn: what the agent thinks, says, and which tools it calls."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    reasoning: str | None = None
    content: str | None = None


Script = Generator[Step, list[CallResult], None]


@dataclass(slots=True)
class Context:
    """What a script starts from: the request, the offered tools, its random generator."""

    query: str
    tools: tuple[str, ...]
    rng: random.Random
    seed: int

    def offers(self, tool: str) -> bool:
        """Whether the environment offers `tool` in this episode."""
        return tool in self.tools


def to_message(step: Step, turn: int) -> AssistantMessage:
    """The step as an assistant message; call ids are ``call_<turn>_<i>``."""
    calls = [
        ToolCall(
            id=f"call_{turn}_{i}",
            function=FunctionCall(name=name, arguments=json.dumps(args, ensure_ascii=False)),
        )
        for i, (name, args) in enumerate(step.calls, start=1)
    ]
    return AssistantMessage(
        content=step.content, reasoning_content=step.reasoning, tool_calls=calls or None
    )


class ScriptedPolicy:
    """Base of the reference policies: subclasses write :meth:`script`."""

    name: ClassVar[str] = "scripted"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def script(self, ctx: Context) -> Script:
        """The agent's behaviour: yield a Step per turn, receive that turn's results."""
        raise NotImplementedError

    def context(self, conversation: Conversation) -> Context:
        """The script's starting point for this conversation."""
        rng = random.Random(f"{self.name}|{self.seed}|{conversation.query}")
        return Context(
            query=conversation.query, tools=conversation.tools, rng=rng, seed=self.seed
        )

    def next_step(self, messages: list[ChatMessage], tools: list[dict[str, Any]]) -> Step:
        """Replay the script over the conversation and return the step that comes next.

        A script that has ended (or ends early) is answered with terminate(failure): an
        episode must always be able to close.
        """
        conversation = read_conversation(messages, tools)
        script = self.script(self.context(conversation))
        try:
            step = next(script)
            for results in conversation.turns:
                step = script.send(results)
        except StopIteration:
            step = Step(
                calls=[("terminate", {"status": "failure"})],
                reasoning="I have nothing more to try, so I will close the session.",
            )
        finally:
            script.close()
        return step

    async def act(
        self, messages: list[ChatMessage], tools: list[dict[str, Any]]
    ) -> AssistantMessage:
        """The next turn, computed from the messages and tool schemas alone."""
        turn = sum(1 for m in messages if m.role == "assistant") + 1
        return to_message(self.next_step(messages, tools), turn)
