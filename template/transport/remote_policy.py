"""A miner seen as a policy: each ``act`` is one signed ``POST /step`` to it.

The validator plays a miner's episode with the same ``run_episode`` as any local policy; a
failed turn surfaces as the client's typed :class:`~template.errors.TransportError`, which
the episode loop records as that turn's failure.
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shopbench.chat import MAX_TURNS, AssistantMessage, ChatMessage
from shopbench.errors import first_problem
from template.errors import InvalidRequest
from template.protocol import StepRequest, ToolSchema, Usage, WireMessage
from template.transport.client import MinerClient, MinerEndpoint


class TurnReport(BaseModel):
    """What one remote turn cost and which model answered it."""

    model_config = ConfigDict(frozen=True)

    turn: int = Field(ge=1)
    latency_ms: float = Field(ge=0)
    model: str | None = None
    usage: Usage | None = None


class RemotePolicy:
    """The policy a miner serves, for one episode (`episode_id`), over a shared client."""

    def __init__(
        self,
        client: MinerClient,
        endpoint: MinerEndpoint,
        episode_id: str,
        *,
        max_turns: int = MAX_TURNS,
        deadline_s: float | None = None,
    ) -> None:
        self.client = client
        self.endpoint = endpoint
        self.episode_id = episode_id
        self.max_turns = max_turns
        self.deadline_s = deadline_s if deadline_s is not None else client.config.turn_deadline_s
        self.name = f"miner-{endpoint.uid}"
        self.turns: list[TurnReport] = []

    async def act(
        self, messages: list[ChatMessage], tools: list[dict[str, Any]]
    ) -> AssistantMessage:
        """The miner's next message; a TransportError subclass when the turn fails.

        The turn number is the count of assistant messages so far plus one, so a retried or
        replayed history always carries the number the miner expects.
        """
        turn = 1 + sum(1 for m in messages if m.role == "assistant")
        try:
            request = StepRequest(
                episode_id=self.episode_id,
                turn=turn,
                max_turns=self.max_turns,
                deadline_ms=max(1, int(self.deadline_s * 1000)),
                messages=[WireMessage.from_chat(m) for m in messages],
                tools=[ToolSchema.model_validate(t) for t in tools],
            )
        except ValidationError as e:
            why = first_problem(e, default="request")
            raise InvalidRequest(str(self.endpoint), why) from None
        started = time.perf_counter()
        reply = await self.client.step(self.endpoint, request, deadline_s=self.deadline_s)
        self.turns.append(
            TurnReport(
                turn=turn,
                latency_ms=(time.perf_counter() - started) * 1000,
                model=reply.model,
                usage=reply.usage,
            )
        )
        return reply.message.to_assistant()
