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

Replaying from the start every turn costs time quadratic in the turns, so a policy also
keeps the suspended scripts of recent conversations, keyed by a fingerprint of the
conversation up to the step it returned; when the next call continues such a conversation,
the script is resumed with the new results instead of replayed. Resuming and replaying give
the same step — the keep is only a shortcut, and a conversation it does not hold is replayed.
"""

from __future__ import annotations

import json
import random
import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from shopbench.agents.reference.observations import (
    CallResult,
    Conversation,
    read_conversation,
    turn_results,
)
from shopbench.chat import AssistantMessage, ChatMessage, FunctionCall, ToolCall
from shopbench.records.tools import Tool

MAX_SUSPENDED = 512  # scripts kept for resuming (more live episodes than this replay)


@dataclass(slots=True)
class Step:
    """One turn: what the agent thinks, says, and which tools it calls."""

    calls: Sequence[tuple[str, Any]] = field(default_factory=list)
    """(tool, arguments): an object, sent as JSON text, or text sent exactly as written."""
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
    max_turns: int = 30

    def offers(self, tool: str) -> bool:
        """Whether the environment offers `tool` in this episode."""
        return tool in self.tools


def to_message(step: Step, turn: int) -> AssistantMessage:
    """The step as an assistant message; call ids are ``call_<turn>_<i>``."""
    calls = [
        ToolCall(
            id=f"call_{turn}_{i}",
            function=FunctionCall(
                name=name,
                arguments=args if isinstance(args, str) else json.dumps(args, ensure_ascii=False),
            ),
        )
        for i, (name, args) in enumerate(step.calls, start=1)
    ]
    return AssistantMessage(
        content=step.content, reasoning_content=step.reasoning, tool_calls=calls or None
    )


def fingerprint(messages: list[ChatMessage]) -> tuple[int, int]:
    """A process-local fingerprint of a conversation: what a resumed script depends on."""
    return len(messages), hash(tuple(_message_key(m) for m in messages))


def _message_key(m: ChatMessage | AssistantMessage) -> tuple[object, ...]:
    calls = tuple(
        (c.id, c.function.name, c.function.arguments) for c in m.tool_calls or ()
    )
    return (m.role, m.content, m.reasoning_content, getattr(m, "tool_call_id", None), calls)


def _tools_key(tools: list[dict[str, Any]]) -> int:
    """The offered tool names: the same conversation with other tools is another episode."""
    return hash(tuple(t.get("function", {}).get("name", "") for t in tools if isinstance(t, dict)))


class ScriptedPolicy(ABC):
    """Base of the reference policies: subclasses write :meth:`script`."""

    name: ClassVar[str] = "scripted"
    honest: ClassVar[bool | None] = None
    needs_catalog: ClassVar[bool] = False
    """Whether the policy is built with the catalog (it solves tasks on its own copy)."""
    adversary: ClassVar[bool] = False
    """Whether the policy is an attack on curation, played by name only: it is left out of
    the default sets (the arena's miners, calibration, the benches), whose measured figures
    it would shift."""
    """True: it shops for real, and a judge must score it high; False: it imitates shopping
    (narrates calls its reasoning does not drive, cheats, guesses), and a judge must score
    it low; None: neither (careless or random play, which no judge target speaks of)."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self._suspended: OrderedDict[tuple[int, int, int, int], Script] = OrderedDict()
        self._lock = threading.Lock()

    @abstractmethod
    def script(self, ctx: Context) -> Script:
        """The agent's behaviour: yield a Step per turn, receive that turn's results."""

    def context(self, conversation: Conversation) -> Context:
        """The script's starting point for this conversation."""
        rng = random.Random(f"{self.name}|{self.seed}|{conversation.query}")
        return Context(
            query=conversation.query, tools=conversation.tools, rng=rng, seed=self.seed,
            max_turns=conversation.max_turns,
        )

    async def act(
        self, messages: list[ChatMessage], tools: list[dict[str, Any]]
    ) -> AssistantMessage:
        """The next turn, computed from the messages and tool schemas alone."""
        turn = sum(1 for m in messages if m.role == "assistant") + 1
        script = self._resume(messages, tools)
        if script is not None:
            step = self._advance(script, turn_results(messages, _last_turn(messages)))
        else:
            script = self._replay(messages, tools)
            step = self._advance(script, None)
        if step is None:  # the script has ended: an episode must always be able to close
            return to_message(_give_up(), turn)
        message = to_message(step, turn)
        self._keep(messages, tools, message, script)
        return message

    # -- the keep of suspended scripts ------------------------------------------------------

    def _replay(self, messages: list[ChatMessage], tools: list[dict[str, Any]]) -> Script:
        """A script brought up to the conversation's end, waiting for its next send(None)."""
        conversation = read_conversation(messages, tools)
        script = self.script(self.context(conversation))
        return _Replayed(script, conversation.turns)  # type: ignore[return-value]

    @staticmethod
    def _advance(script: Script, results: list[CallResult] | None) -> Step | None:
        try:
            return script.send(results) if results is not None else next(script)
        except StopIteration:
            return None

    def _keep(
        self,
        messages: list[ChatMessage],
        tools: list[dict[str, Any]],
        reply: AssistantMessage,
        script: Script,
    ) -> None:
        """Keep the script that produced `reply` to `messages`, for the next turn."""
        n, h = fingerprint(messages)
        key = (n, h, hash(_message_key(reply)), _tools_key(tools))
        with self._lock:
            self._suspended[key] = script
            while len(self._suspended) > MAX_SUSPENDED:
                self._suspended.popitem(last=False)[1].close()

    def _resume(
        self, messages: list[ChatMessage], tools: list[dict[str, Any]]
    ) -> Script | None:
        """The kept script whose last reply is this conversation's last turn, if any."""
        last = _last_turn(messages)
        if last < 0:
            return None
        n, h = fingerprint(messages[:last])
        key = (n, h, hash(_message_key(messages[last])), _tools_key(tools))
        with self._lock:
            return self._suspended.pop(key, None)


def _last_turn(messages: list[ChatMessage]) -> int:
    """Index of the last assistant message; -1 when there is none."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "assistant":
            return i
    return -1


class _Replayed:
    """A script fed the recorded results of earlier turns, then handed on live."""

    def __init__(self, script: Script, turns: list[list[CallResult]]) -> None:
        self._script = script
        self._turns = turns
        self._started = False

    def send(self, value: list[CallResult] | None) -> Step:
        if not self._started:
            self._started = True
            step = next(self._script)
            for results in self._turns:
                step = self._script.send(results)
            return step
        return self._script.send(value)  # type: ignore[arg-type]

    def __next__(self) -> Step:
        return self.send(None)

    def close(self) -> None:
        self._script.close()


def _give_up() -> Step:
    return Step(
        calls=[(Tool.TERMINATE, {"status": "failure"})],
        reasoning="I have nothing more to try, so I will close the session.",
    )
