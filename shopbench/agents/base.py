"""The policy interface: the only thing an agent implements."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from shopbench.chat import AssistantMessage, ChatMessage


@runtime_checkable
class Policy(Protocol):
    """An agent: given the conversation so far and the tool schemas, return the next turn.

    A policy never sees the task object: only the messages (system prompt, user query,
    earlier turns and tool results) and the OpenAI function schemas of the environment.
    """

    name: str

    async def act(
        self, messages: list[ChatMessage], tools: list[dict[str, Any]]
    ) -> AssistantMessage:
        """Return the assistant's next message (reasoning, content, tool calls)."""
        ...
