"""Reading a policy's reply: whatever it returned, made into a bounded assistant message.

A policy may return an :class:`~shopbench.chat.AssistantMessage`, any object with the same
fields, or a dict; arguments may be JSON text or an object. The reply is read without size
limits so that oversize is reported to the agent, not rejected as garbage, then cut to the
record's limits with every tool call given a unique id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from shopbench.chat import (
    MAX_ARGUMENTS_BYTES,
    MAX_CALL_ID,
    MAX_STORED_CALLS,
    MAX_TOOL_NAME,
    ChatMessage,
    FunctionCall,
    ToolCall,
    arguments_as_text,
    cut_utf8,
)
from shopbench.errors import first_problem
from shopbench.records.trajectory import MAX_DETAIL_CHARS, FailureKind

if TYPE_CHECKING:
    from shopbench.env.episode import Episode


class _LooseFunction(BaseModel):
    """A :class:`~shopbench.chat.FunctionCall` without its limits; arguments sent as an
    object are re-encoded as JSON text, missing ones read as ``""``."""

    model_config = ConfigDict(extra="ignore")

    name: str = ""
    arguments: str = ""

    @field_validator("arguments", mode="before")
    @classmethod
    def _as_text(cls, value: Any) -> Any:
        return "" if value is None else arguments_as_text(value)


class _LooseToolCall(BaseModel):
    """A :class:`~shopbench.chat.ToolCall` without its limits; a missing id reads as ``""``."""

    model_config = ConfigDict(extra="ignore")

    id: str = ""
    function: _LooseFunction

    @field_validator("id", mode="before")
    @classmethod
    def _no_id(cls, value: Any) -> Any:
        return "" if value is None else value


class LooseReply(BaseModel):
    """An assistant reply read without size limits, so oversize is reported, not rejected.

    Its fields are :class:`~shopbench.chat.AssistantMessage`'s, with the same names and
    types, minus the limits. It is written out rather than derived: the chat types carry
    their limits in their field annotations, and a model built by stripping them at run
    time would have no static types; the reader also differs in what it forgives (a
    missing tool name, any ``role`` or ``type``), which :func:`prepare` then bounds.
    """

    model_config = ConfigDict(extra="ignore")

    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[_LooseToolCall] | None = None


def read_reply(raw: object) -> LooseReply:
    """The policy's return value as a reply; ValueError saying why when it is not one."""
    if isinstance(raw, BaseModel):
        raw = {
            name: getattr(raw, name, None)
            for name in ("content", "reasoning_content", "tool_calls")
        }
        if isinstance(raw["tool_calls"], list):
            raw["tool_calls"] = [
                c.model_dump() if isinstance(c, BaseModel) else c for c in raw["tool_calls"]
            ]
    if not isinstance(raw, dict):
        raise ValueError(f"the policy returned {type(raw).__name__}, not an assistant message")
    try:
        return LooseReply.model_validate(raw)
    except ValidationError as e:
        raise ValueError(
            f"the reply is not an assistant message ({first_problem(e, default='message')})"
        ) from None


def short(text: str) -> str:
    """`text` cut to MAX_DETAIL_CHARS characters, marked with an ellipsis when cut."""
    return text if len(text) <= MAX_DETAIL_CHARS else text[: MAX_DETAIL_CHARS - 3] + "..."


@dataclass(slots=True)
class PreparedTurn:
    """One reply made ready to record and run."""

    message: ChatMessage
    calls: list[tuple[str, str, str]]  # (tool call id, name, arguments text as sent)
    notices: list[tuple[FailureKind, str]]  # problems the agent is told about


def prepare(
    reply: LooseReply, turn: int, episode: Episode, used_ids: set[str]
) -> PreparedTurn:
    """Bound the reply to the record's limits and give every tool call a unique id."""
    limits = episode.limits
    notices: list[tuple[FailureKind, str]] = []
    violation = limits.message_violation(reply.reasoning_content, reply.content)
    if violation is not None:
        notices.append(("oversized", f"{violation}; the message was cut and its calls not run"))
    loose_calls = list(reply.tool_calls or [])
    if len(loose_calls) > MAX_STORED_CALLS:
        notices.append(
            (
                "too_many_calls",
                f"{len(loose_calls)} tool calls in one message; only the first "
                f"{MAX_STORED_CALLS} were kept (at most {limits.max_calls_per_turn} run)",
            )
        )
        loose_calls = loose_calls[:MAX_STORED_CALLS]
    calls: list[tuple[str, str, str]] = []
    stored: list[ToolCall] = []
    for i, c in enumerate(loose_calls, start=1):
        call_id = c.id[:MAX_CALL_ID]
        if not call_id or call_id in used_ids:
            call_id = f"call_{turn}_{i}"
        used_ids.add(call_id)
        args = c.function.arguments
        calls.append((call_id, c.function.name, args))
        stored.append(
            ToolCall(
                id=call_id,
                function=FunctionCall(
                    name=c.function.name[:MAX_TOOL_NAME],
                    arguments=cut_utf8(args, MAX_ARGUMENTS_BYTES),
                ),
            )
        )
    message = ChatMessage(
        role="assistant",
        content=cut_utf8(reply.content, limits.max_content_bytes),
        reasoning_content=cut_utf8(reply.reasoning_content, limits.max_reasoning_bytes),
        tool_calls=stored or None,
    )
    if not calls and violation is None:
        said = (reply.content or "").strip() or (reply.reasoning_content or "").strip()
        kind: FailureKind = "no_tool_call" if said else "empty_reply"
        notices.append((kind, "the message made no tool call"))
    return PreparedTurn(message=message, calls=calls, notices=notices)


def nudge(kind: FailureKind, text: str, episode: Episode) -> str:
    """What the agent is told after a turn that ran no tool."""
    tools = ", ".join(episode.tool_names)
    if kind == "oversized":
        return f"Error: your message was not accepted: {text}. Keep messages within the limit."
    if kind == "empty_reply":
        return f"Error: your message was empty. Continue by calling one of the tools: {tools}."
    return (
        "Error: your message called no tool, so nothing happened. Continue by calling one of "
        f"the tools: {tools}; call terminate when you are done."
    )


