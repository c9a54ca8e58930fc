"""A local model's generated text read as an assistant message.

The text is what Qwen3 (and the hermes format vLLM's parser reads) writes after the
assistant header: optional ``<think>...</think>`` reasoning, then content, then
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks. It is read by the same
reader as a chat-completion whose server parsed nothing
(:func:`shopbench.agents.openai_policy.parse_completion`), so a local model and the same
weights behind an endpoint are held to the same rules, a reply cut by the token limit
included: a block that is not a JSON call becomes a call the environment refuses (recorded
in the tool log), text without any call is a turn without a tool call (recorded in the
trajectory's failures), reasoning that never closed is reasoning, and a ``<tool_call>``
that never closed is read as a block all the same.
"""

from __future__ import annotations

from shopbench.agents.openai_policy import parse_completion
from shopbench.chat import AssistantMessage


def parse_generation(text: str) -> AssistantMessage:
    """The assistant message of one generated reply (special tokens already removed)."""
    return parse_completion({"choices": [{"message": {"role": "assistant", "content": text}}]})
