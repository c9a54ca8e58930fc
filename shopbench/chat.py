"""The conversation: the chat message types every layer shares, and every limit of an episode.

This is the bottom layer of shopbench (it imports nothing of it). The environment, the
policies, the episode loop, the judges, the trajectory record and the wire protocol all
speak these types, and every size bound they enforce is declared here once
(DESIGN.md, "Limits of an episode"). Sizes of text are UTF-8 bytes, everywhere.

The message shapes mirror the OpenAI chat-completions format (and what vLLM returns), so a
miner can forward a request to its model server almost unchanged.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, overload

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

# -- limits ---------------------------------------------------------------------------------

MAX_TURNS = 30
"""Assistant turns of one episode."""
MAX_TOOL_CALLS = 5
"""Tool calls the environment runs per assistant turn."""
MAX_STORED_CALLS = 16
"""Tool calls of one reply kept in the record (more are dropped; only MAX_TOOL_CALLS run)."""
MAX_TEXT_BYTES = 16 * 1024
"""UTF-8 bytes of an assistant message's reasoning, and of its content."""
MAX_ARGUMENTS_BYTES = 4 * 1024
"""UTF-8 bytes of one tool call's arguments as JSON text."""
MAX_TOOL_NAME = 64
"""Characters of a tool name (ASCII by the schema's pattern)."""
MAX_CALL_ID = 128
"""Characters of a tool call id."""
MAX_VIEW_IDS = 10
"""Product ids per view_product_information call."""
MAX_REQUEST_BYTES = 1024 * 1024
"""Bytes of one validator → miner request."""


def utf8_size(text: str) -> int:
    """The length of `text` in UTF-8 bytes."""
    return len(text.encode("utf-8"))


@overload
def cut_utf8(text: str, cap: int) -> str: ...


@overload
def cut_utf8(text: None, cap: int) -> None: ...


def cut_utf8(text: str | None, cap: int) -> str | None:
    """`text` cut to at most `cap` UTF-8 bytes, never splitting a character."""
    if text is None:
        return None
    data = text.encode("utf-8")
    if len(data) <= cap:
        return text
    return data[:cap].decode("utf-8", errors="ignore")


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, the last one ``…`` when it was cut (for a reader:
    a report, a diagnosis, a mismatch)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def utf8_at_most(limit: int) -> AfterValidator:
    """A pydantic validator rejecting strings longer than `limit` UTF-8 bytes."""

    def check(value: str | None) -> str | None:
        if value is not None and utf8_size(value) > limit:
            raise ValueError(f"is {utf8_size(value)} bytes; the limit is {limit}")
        return value

    return AfterValidator(check)


Text16K = Annotated[str | None, utf8_at_most(MAX_TEXT_BYTES)]
"""Assistant reasoning or content: at most 16 KB of UTF-8."""
ArgumentsText = Annotated[str, utf8_at_most(MAX_ARGUMENTS_BYTES)]
"""A tool call's arguments as JSON text: at most 4 KB of UTF-8."""
ToolName = Annotated[str, Field(max_length=MAX_TOOL_NAME)]
"""The name of the tool a call asks for: at most MAX_TOOL_NAME characters."""
CallId = Annotated[str, Field(max_length=MAX_CALL_ID)]
"""A tool call's id (and a tool message's ``tool_call_id``): at most MAX_CALL_ID characters."""


def arguments_as_text(value: object) -> object:
    """Tool-call arguments given as an object (as some servers and policies send them)
    re-encoded as the JSON text the chat types hold; any other value is returned unchanged.

    An object JSON cannot encode becomes its ``str``, so a bad call stays readable."""
    if not isinstance(value, dict):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


class EpisodeLimits(BaseModel):
    """Every bound an episode enforces; the defaults are the subnet's consensus values."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_turns: int = Field(default=MAX_TURNS, ge=1, description="assistant turns per episode")
    max_calls_per_turn: int = Field(
        default=MAX_TOOL_CALLS, ge=1, description="tool calls per turn"
    )
    max_view_ids: int = Field(
        default=MAX_VIEW_IDS, ge=1, description="product ids per view_product_information call"
    )
    max_recommend_ids: int = Field(
        default=10, ge=1, description="product ids in the one recommend_product call"
    )
    max_web_results: int = Field(default=10, ge=1, description="upper bound of max_results")
    max_string_chars: int = Field(
        default=500, ge=1, description="characters in any one string argument (q, ids, ...)"
    )
    max_arguments_bytes: int = Field(
        default=MAX_ARGUMENTS_BYTES, ge=64, description="bytes of one call's arguments as JSON"
    )
    max_tool_name_chars: int = Field(
        default=MAX_TOOL_NAME, ge=1, description="characters in a tool name"
    )
    max_description_chars: int = Field(
        default=4000, ge=100, description="a viewed product's description is cut to this length"
    )
    max_snippet_chars: int = Field(
        default=600, ge=50, description="characters of page text per web_search result"
    )
    max_content_bytes: int = Field(
        default=MAX_TEXT_BYTES, ge=1, description="bytes of an assistant message's content"
    )
    max_reasoning_bytes: int = Field(
        default=MAX_TEXT_BYTES, ge=1, description="bytes of an assistant message's reasoning"
    )

    def message_violation(self, reasoning: str | None, content: str | None) -> str | None:
        """Why an assistant message is over its size limits, or None when it fits."""
        for name, text, cap in (
            ("reasoning_content", reasoning, self.max_reasoning_bytes),
            ("content", content, self.max_content_bytes),
        ):
            if text is not None and utf8_size(text) > cap:
                return f"{name} is {utf8_size(text)} bytes; the limit is {cap}"
        return None


# -- messages -------------------------------------------------------------------------------


class FunctionCall(BaseModel):
    """A function the model asks to call; `arguments` is the JSON text the model wrote."""

    model_config = ConfigDict(extra="ignore")

    name: ToolName
    arguments: ArgumentsText = "{}"


class ToolCall(BaseModel):
    """One tool call of an assistant turn."""

    model_config = ConfigDict(extra="ignore")

    id: CallId = ""
    type: Literal["function"] = "function"
    function: FunctionCall

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as a dict; raises ValueError when they are not a JSON object."""
        value = json.loads(self.function.arguments or "{}")
        if not isinstance(value, dict):
            raise ValueError("tool arguments must be a JSON object")
        return value


class AssistantMessage(BaseModel):
    """What a policy returns for one turn: reasoning and content at most 16 KB of UTF-8
    each, at most MAX_TOOL_CALLS tool calls."""

    model_config = ConfigDict(extra="ignore")

    role: Literal["assistant"] = "assistant"
    content: Text16K = None
    reasoning_content: Text16K = None
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
