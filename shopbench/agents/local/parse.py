"""A local model's generated text read as an assistant message.

The text is what Qwen3 (and the hermes format vLLM's parser reads) writes after the
assistant header: optional ``<think>...</think>`` reasoning, then content, then
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks. It is read by the same
reader as a chat-completion whose server parsed nothing
(:func:`shopbench.agents.openai_policy.parse_completion`), so a local model and a model
behind an endpoint are held to the same rules: a block that is not a JSON call becomes a
call the environment refuses (recorded in the tool log), text without any call is a turn
without a tool call (recorded in the trajectory's failures).

What only generation produces is handled here: a reply cut by the token limit. Reasoning
that never closed is reasoning (the turn made no call); a ``<tool_call>`` that never closed
is read as a block all the same, so a call whose JSON was complete still runs and one cut
mid-way is refused by the environment like any broken call.
"""

from __future__ import annotations

from pydantic import ValidationError

from shopbench.agents.openai_policy import parse_completion
from shopbench.chat import AssistantMessage

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"


def parse_generation(text: str) -> AssistantMessage:
    """The assistant message of one generated reply (special tokens already removed)."""
    body = text
    stripped = body.lstrip()
    if stripped.startswith(THINK_OPEN) and THINK_CLOSE not in stripped:
        fields = {"reasoning_content": stripped[len(THINK_OPEN) :].strip() or None}
        try:
            return AssistantMessage.model_validate(fields)
        except ValidationError:  # over the size limit: the episode loop tells the agent
            return AssistantMessage.model_construct(**fields)
    if body.count(CALL_OPEN) > body.count(CALL_CLOSE):
        body = body + CALL_CLOSE
    return parse_completion({"choices": [{"message": {"role": "assistant", "content": body}}]})
