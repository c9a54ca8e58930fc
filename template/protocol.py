"""The wire protocol between validators and miners: one signed HTTP request per turn.

``POST /step`` carries a :class:`StepRequest` (the OpenAI chat messages so far and the
OpenAI function schemas of the environment) and is answered by a :class:`StepResponse`
whose ``message`` has the shape an OpenAI-compatible server returns in
``choices[0].message``, so a miner can be a thin proxy to its model server.
``GET /card`` returns the miner's :class:`AgentCard`.

The wire messages are thin validators over the conversation's own types
(:mod:`shopbench.chat`): each *is* its chat type, with the same fields and the limits
declared there (DESIGN.md, "Limits of an episode"), plus what only the wire needs: the
``reasoning`` alias, arguments sent as an object re-encoded as JSON text, a ``null`` call
id read as empty, per-role checks, and the caps on whole messages and requests below.
Models ignore unknown keys (OpenAI servers add fields such as ``refusal``) but never
accept a value over its limit; the transport caps whole bodies before any of this runs.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from shopbench.chat import (
    MAX_REQUEST_BYTES,
    MAX_TEXT_BYTES,
    MAX_TOOL_CALLS,
    MAX_TOOL_NAME,
    MAX_TURNS,
    AssistantMessage,
    CallId,
    ChatMessage,
    FunctionCall,
    Text16K,
    ToolCall,
    ToolName,
    arguments_as_text,
    utf8_at_most,
    utf8_size,
)
from shopbench.records.trajectory import MAX_AGENT_NAME_CHARS, AgentName, printable_name

PROTOCOL_VERSION = 1

# Limits that exist only on the wire, derived from the conversation's.
MAX_MESSAGES = 2 + MAX_TURNS * (1 + MAX_TOOL_CALLS)
"""Messages of one request: system prompt and query, then per turn one assistant message
and one result per call."""
MAX_MESSAGE_BYTES = MAX_REQUEST_BYTES // 4
"""UTF-8 bytes of any one message's content (a tool result may be longer than an
assistant's text)."""
MAX_REPLY_BYTES = MAX_REQUEST_BYTES // 4
"""Bytes of one reply body. A reply holds at most 2 × 16 KB of text and 5 × 4 KB of
arguments; JSON escaping can multiply that (a control character becomes six bytes), so
the cap leaves room."""
MAX_TOOLS = 16
"""Function schemas offered in one request."""
MAX_DEADLINE_MS = 600_000
"""The longest turn deadline a request may give."""
MAX_MODEL_CHARS = MAX_AGENT_NAME_CHARS
"""Characters of a model name or revision (the record's limit: the card's model is archived)."""
MAX_TOKENS_COUNT = 10**9
"""The largest token count a usage report may carry."""

_TOOL_NAME_PATTERN = rf"^[A-Za-z0-9_-]{{1,{MAX_TOOL_NAME}}}$"


class WireFunctionCall(FunctionCall):
    """A :class:`~shopbench.chat.FunctionCall` as sent on the wire: a non-empty name, and
    arguments given as an object re-encoded as JSON text (missing ones read as ``"{}"``)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: Annotated[ToolName, Field(min_length=1)]

    @field_validator("arguments", mode="before")
    @classmethod
    def _encode_object(cls, value: Any) -> Any:
        # Some OpenAI-compatible servers return the arguments already parsed.
        return "{}" if value is None else arguments_as_text(value)


class WireToolCall(ToolCall):
    """A :class:`~shopbench.chat.ToolCall` on the wire; a ``null`` id reads as ``""``."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    function: WireFunctionCall

    @field_validator("id", mode="before")
    @classmethod
    def _no_id(cls, value: Any) -> Any:
        return "" if value is None else value

    def to_tool_call(self) -> ToolCall:
        """The plain domain tool call."""
        # The wire models validate every limit of the domain's (they are its subclasses),
        # so the values are constructed directly: a second validation pass is most of a
        # request's parsing cost on a long history.
        function = FunctionCall.model_construct(
            name=self.function.name, arguments=self.function.arguments
        )
        return ToolCall.model_construct(id=self.id, type="function", function=function)


class WireAssistantMessage(AssistantMessage):
    """The :class:`~shopbench.chat.AssistantMessage` a miner returns, as read off the wire.

    ``reasoning`` (the newer vLLM key) is accepted as ``reasoning_content``.
    """

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    reasoning_content: Text16K = Field(
        default=None, validation_alias=AliasChoices("reasoning_content", "reasoning")
    )
    tool_calls: list[WireToolCall] | None = Field(default=None, max_length=MAX_TOOL_CALLS)

    def to_assistant(self) -> AssistantMessage:
        """The plain domain message a policy returns (empty tool call lists become None)."""
        calls = [c.to_tool_call() for c in self.tool_calls] if self.tool_calls else None
        return AssistantMessage.model_construct(
            role="assistant",
            content=self.content,
            reasoning_content=self.reasoning_content,
            tool_calls=calls,
        )

    @classmethod
    def from_assistant(cls, message: AssistantMessage) -> WireAssistantMessage:
        """The wire form of a policy's message; ValidationError when it breaks a wire limit
        or is not a message at all."""
        if isinstance(message, BaseModel):
            return cls.model_validate(message.model_dump(exclude_none=True))
        return cls.model_validate(message)


class WireMessage(ChatMessage):
    """A :class:`~shopbench.chat.ChatMessage` on the wire, with the limits of its fields and
    per-role checks: an assistant's content is at most MAX_TEXT_BYTES, any other message's
    at most MAX_MESSAGE_BYTES, and only an assistant carries tool calls."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    content: Annotated[str | None, utf8_at_most(MAX_MESSAGE_BYTES)] = None
    reasoning_content: Text16K = None
    tool_calls: list[WireToolCall] | None = Field(default=None, max_length=MAX_TOOL_CALLS)
    tool_call_id: CallId | None = None
    name: ToolName | None = None

    @model_validator(mode="after")
    def _per_role(self) -> WireMessage:
        if self.role == "assistant" and self.content is not None:
            size = utf8_size(self.content)
            if size > MAX_TEXT_BYTES:
                raise ValueError(
                    f"assistant content is {size} bytes; the limit is {MAX_TEXT_BYTES}"
                )
        if self.role != "assistant" and self.tool_calls:
            raise ValueError(f"a {self.role} message cannot carry tool_calls")
        return self

    def to_chat(self) -> ChatMessage:
        """The plain domain message."""
        calls = [c.to_tool_call() for c in self.tool_calls] if self.tool_calls else None
        return ChatMessage.model_construct(
            role=self.role,
            content=self.content,
            reasoning_content=self.reasoning_content,
            tool_calls=calls,
            tool_call_id=self.tool_call_id,
            name=self.name,
        )

    @classmethod
    def from_chat(cls, message: ChatMessage) -> WireMessage:
        """The wire form of a domain message (validated against the wire limits)."""
        return cls.model_validate(message.to_openai())


class FunctionSchema(BaseModel):
    """An OpenAI function declaration; extra keys (``strict`` ...) pass through unchanged."""

    model_config = ConfigDict(extra="allow", frozen=True)

    name: str = Field(pattern=_TOOL_NAME_PATTERN)
    description: str = Field(default="", max_length=4096)
    parameters: dict[str, Any] = Field(default_factory=dict)


class ToolSchema(BaseModel):
    """One entry of the OpenAI ``tools`` list."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    type: Literal["function"] = "function"
    function: FunctionSchema

    def to_openai(self) -> dict[str, Any]:
        """The dict an OpenAI-compatible server accepts."""
        return self.model_dump(exclude_none=True)


class StepRequest(BaseModel):
    """The body of ``POST /step``: the conversation so far and the tools, for one turn."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    protocol_version: Literal[1] = PROTOCOL_VERSION
    episode_id: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._:-]+$")
    turn: int = Field(ge=1, le=MAX_TURNS, description="this turn's number, from 1")
    max_turns: int = Field(default=MAX_TURNS, ge=1, le=MAX_TURNS)
    deadline_ms: int = Field(ge=1, le=MAX_DEADLINE_MS, description="time the miner has")
    messages: list[WireMessage] = Field(min_length=1, max_length=MAX_MESSAGES)
    tools: list[ToolSchema] = Field(default_factory=list, max_length=MAX_TOOLS)

    @model_validator(mode="after")
    def _turn_within_episode(self) -> StepRequest:
        if self.turn > self.max_turns:
            raise ValueError(f"turn {self.turn} is past max_turns {self.max_turns}")
        return self

    def chat_messages(self) -> list[ChatMessage]:
        """The messages as the domain type a policy receives."""
        return [m.to_chat() for m in self.messages]

    def tool_dicts(self) -> list[dict[str, Any]]:
        """The tools as the OpenAI dicts a policy receives."""
        return [t.to_openai() for t in self.tools]


class Usage(BaseModel):
    """Token counts as an OpenAI-compatible server reports them."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    prompt_tokens: int = Field(default=0, ge=0, le=MAX_TOKENS_COUNT)
    completion_tokens: int = Field(default=0, ge=0, le=MAX_TOKENS_COUNT)
    total_tokens: int = Field(default=0, ge=0, le=MAX_TOKENS_COUNT)


class StepResponse(BaseModel):
    """The reply to ``POST /step``: the assistant's next message, and optionally its model."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    protocol_version: Literal[1] = PROTOCOL_VERSION
    message: WireAssistantMessage
    model: str | None = Field(default=None, max_length=MAX_MODEL_CHARS)
    usage: Usage | None = None


class AgentCard(BaseModel):
    """What ``GET /card`` returns: the model a miner serves and its revision.

    The validator archives both in every record of the miner's round, so each is what the
    record holds: one line of at most :data:`MAX_MODEL_CHARS` printable characters (no
    control, line-break, bidi or zero-width character); a card breaking that is refused
    whole, and the records then name no model."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    protocol_version: Literal[1] = PROTOCOL_VERSION
    model: AgentName
    revision: Annotated[
        str, StringConstraints(max_length=MAX_MODEL_CHARS), AfterValidator(printable_name)
    ] = ""
