"""OpenAI chat message shapes: what policies receive and return, and what miners send.

These mirror the OpenAI chat-completions wire format (and what vLLM returns), so a miner can
forward a request to its model server almost unchanged. Size limits are the episode limits
of the design: reasoning and content at most 16 KB each, at most 5 tool calls per turn.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_TEXT_BYTES = 16 * 1024
MAX_TOOL_CALLS = 5
MAX_ARGUMENTS_BYTES = 4 * 1024
MAX_TOOL_NAME = 64


class FunctionCall(BaseModel):
    """A function the model asks to call; `arguments` is the JSON text the model wrote."""

    model_config = ConfigDict(extra="ignore")

    name: str = Field(max_length=MAX_TOOL_NAME)
    arguments: str = Field(default="{}", max_length=MAX_ARGUMENTS_BYTES)


class ToolCall(BaseModel):
    """One tool call of an assistant turn."""

    model_config = ConfigDict(extra="ignore")

    id: str = Field(default="", max_length=128)
    type: Literal["function"] = "function"
    function: FunctionCall

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as a dict; raises ValueError when they are not a JSON object."""
        value = json.loads(self.function.arguments or "{}")
        if not isinstance(value, dict):
            raise ValueError("tool arguments must be a JSON object")
        return value


class AssistantMessage(BaseModel):
    """What a policy returns for one turn."""

    model_config = ConfigDict(extra="ignore")

    role: Literal["assistant"] = "assistant"
    content: str | None = Field(default=None, max_length=MAX_TEXT_BYTES)
    reasoning_content: str | None = Field(default=None, max_length=MAX_TEXT_BYTES)
    tool_calls: list[ToolCall] | None = Field(default=None, max_length=MAX_TOOL_CALLS)


class ChatMessage(BaseModel):
    """Any message of the conversation: system, user, assistant or tool."""

    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None

    def to_openai(self) -> dict[str, Any]:
        """The dict an OpenAI-compatible server accepts (unset fields omitted)."""
        return self.model_dump(exclude_none=True)
