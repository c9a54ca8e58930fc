"""The marker strings of the model's text format, declared once.

A reply is optional ``<think>...</think>`` reasoning, then content, then hermes
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks; a tool result comes back
inside ``<tool_response>...</tool_response>``; turns are ChatML's ``<|im_start|>ROLE`` ...
``<|im_end|>``.
"""

from __future__ import annotations

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
"""Around the model's reasoning."""

CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
"""Around one hermes tool call, a JSON object with ``name`` and ``arguments``."""

RESPONSE_OPEN, RESPONSE_CLOSE = "<tool_response>", "</tool_response>"
"""Around a tool's result, as the chat template renders it for the model."""

TURN_OPEN, TURN_CLOSE = "<|im_start|>", "<|im_end|>"
"""ChatML's turn markers: the start of a turn (its role follows) and the end of one."""

END_OF_TEXT = "<|endoftext|>"
"""The end of a document; the padding token of Qwen3's tokenizers."""
