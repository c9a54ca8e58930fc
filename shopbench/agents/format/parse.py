"""A completion read as an assistant message: one reader for ``hf:`` and ``openai:`` alike.

A local model's generation and an endpoint's chat completion go through
:func:`parse_completion`, so a local model and the same weights behind an endpoint are held to
the same rules, a reply cut by the token limit included: a block that is not a JSON call
becomes a call the environment refuses (recorded in the tool log), text without any call is a
turn without a tool call (recorded in the trajectory's failures), reasoning that never closed
is reasoning, and a ``<tool_call>`` that never closed is read as a block all the same.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError

from shopbench.agents.format.markers import CALL_CLOSE, CALL_OPEN, THINK_CLOSE, THINK_OPEN
from shopbench.chat import AssistantMessage
from shopbench.openai_compat.errors import MalformedReply

_THINK = re.compile(rf"^\s*(?:{re.escape(THINK_OPEN)})?(.*?){re.escape(THINK_CLOSE)}\s*", re.DOTALL)
_TOOL_CALL_TEXT = re.compile(
    rf"{re.escape(CALL_OPEN)}\s*(.*?)\s*{re.escape(CALL_CLOSE)}", re.DOTALL
)


def parse_generation(text: str) -> AssistantMessage:
    """The assistant message of one generated reply (special tokens already removed): the
    text read as the content of a completion whose server parsed nothing."""
    return parse_completion({"choices": [{"message": {"role": "assistant", "content": text}}]})


def parse_completion(data: Any) -> AssistantMessage:
    """The assistant message of a chat-completion body; MalformedReply if it has none.

    Reasoning comes from ``reasoning_content`` or ``reasoning``, else from a leading
    ``<think>...</think>`` in the content, without the whitespace around it; tool calls
    from ``tool_calls``, else from hermes ``<tool_call>{...}</tool_call>`` blocks in the
    content. Arguments given as an object are re-encoded as JSON text; arguments that are
    not JSON stay as they came, for the environment to reject.

    Content the server parsed nothing of is the model's own text, and may be cut by the
    token limit: a ``<think>`` that never closed is reasoning (the turn made no call), and a
    last ``<tool_call>`` that never closed is read as a block all the same (as vLLM's
    hermes parser reads it), so a complete call runs and a cut one is refused.
    """
    try:
        message = data["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        raise MalformedReply("the reply has no choices[0].message") from None
    if not isinstance(message, dict):
        raise MalformedReply("choices[0].message is not an object")
    content = _text(message.get("content"), "content")
    reasoning = _text(message.get("reasoning_content") or message.get("reasoning"), "reasoning")
    if reasoning is not None:  # vLLM keeps the newlines around a thought; templates drop them
        reasoning = reasoning.strip() or None
    if reasoning is None and content and THINK_CLOSE in content:
        found = _THINK.match(content)
        if found:
            reasoning = found.group(1).strip() or None
            content = content[found.end() :]
    elif reasoning is None and content and content.lstrip().startswith(THINK_OPEN):
        reasoning = content.lstrip()[len(THINK_OPEN) :].strip() or None  # cut while thinking
        content = None
    raw_calls = message.get("tool_calls")
    calls: list[dict[str, Any]] = []
    if isinstance(raw_calls, list) and raw_calls:
        for i, c in enumerate(raw_calls):
            calls.append(_call(c, i))
    elif raw_calls not in (None, []):
        raise MalformedReply("tool_calls is not a list")
    elif content and CALL_OPEN in content:
        if content.count(CALL_OPEN) > content.count(CALL_CLOSE):
            content += CALL_CLOSE  # cut inside the last call
        calls = [_text_call(block, i) for i, block in enumerate(_TOOL_CALL_TEXT.findall(content))]
        content = _TOOL_CALL_TEXT.sub("", content)
    content = content.strip() if content else None
    fields: dict[str, Any] = {
        "content": content or None,
        "reasoning_content": reasoning,
        "tool_calls": calls or None,
    }
    try:
        return AssistantMessage.model_validate(fields)
    except ValidationError:
        # Over a size limit: hand it on as it is, the episode loop tells the agent.
        return AssistantMessage.model_construct(**fields)


def _text(value: Any, what: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):  # content parts: keep the text ones
        parts = [p.get("text", "") for p in value if isinstance(p, dict)]
        return "".join(p for p in parts if isinstance(p, str))
    raise MalformedReply(f"{what} is {type(value).__name__}, not text")


def _call(c: Any, i: int) -> dict[str, Any]:
    if not isinstance(c, dict) or not isinstance(c.get("function"), dict):
        raise MalformedReply(f"tool_calls[{i}] has no function object")
    fn = c["function"]
    name = fn.get("name")
    if not isinstance(name, str):
        raise MalformedReply(f"tool_calls[{i}].function.name is not text")
    args = fn.get("arguments")
    if not isinstance(args, str):
        args = "{}" if args is None else json.dumps(args, ensure_ascii=False)
    call_id = c.get("id") if isinstance(c.get("id"), str) else ""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def _text_call(block: str, i: int) -> dict[str, Any]:
    """A hermes ``<tool_call>`` block; unreadable ones become a call the env will reject."""
    try:
        obj = json.loads(block)
    except json.JSONDecodeError:
        obj = None
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return {"id": "", "type": "function", "function": {"name": "", "arguments": block}}
    args = obj.get("arguments", {})
    text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return {"id": "", "type": "function", "function": {"name": obj["name"], "arguments": text}}
