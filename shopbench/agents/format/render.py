"""A conversation as the prompt a model reads: its chat template and the tools.

Messages go to the template in the form Hugging Face templates read (Qwen3's among them):
``reasoning_content`` kept on assistant turns, tool calls with their arguments as objects,
tool results as ``tool`` messages, and the tool schemas as the template's ``tools``.

A template that knows nothing of tools (a plain ChatML one, as SmolLM2's) would drop the
schemas and every earlier call. For such a template the prompt is made in the hermes form
instead: the schemas described in the system message, earlier reasoning as ``<think>`` and
earlier calls as ``<tool_call>`` blocks in the assistant's content, so the model reads the
same protocol it is asked to write.
"""

from __future__ import annotations

import json
from typing import Any

from shopbench.agents.format.markers import CALL_CLOSE, CALL_OPEN, THINK_CLOSE, THINK_OPEN
from shopbench.chat import ChatMessage, read_arguments

_TOOLS_PREAMBLE = (
    "# Tools\n\nYou may call one or more functions to help with the user's request. The "
    "function signatures are given within <tools></tools> XML tags:\n<tools>\n"
)
_TOOLS_CALL_FORM = (
    "\n</tools>\n\nFor each function call, write a JSON object with the function name and "
    f"arguments within {CALL_OPEN}{CALL_CLOSE} XML tags:\n{CALL_OPEN}\n"
    f'{{"name": <function-name>, "arguments": <args-json-object>}}\n{CALL_CLOSE}'
)


def knows_tools(template: str) -> bool:
    """Whether a chat template renders tool schemas and assistant tool calls itself."""
    return "tools" in template and "tool_calls" in template


def _arguments(text: str) -> Any:
    """The arguments as an object where the one reader reads them, else the text as sent."""
    value, _ = read_arguments(text)
    return value if value is not None else text


def think_block(reasoning: str) -> str:
    """Reasoning as the format writes it in an assistant's content: ``<think>`` and
    ``</think>`` on lines of their own around it."""
    return f"{THINK_OPEN}\n{reasoning}\n{THINK_CLOSE}"


def _call_text(m: ChatMessage) -> str:
    blocks = [
        f"{CALL_OPEN}\n"
        + json.dumps(
            {"name": c.function.name, "arguments": _arguments(c.function.arguments)},
            ensure_ascii=False,
        )
        + f"\n{CALL_CLOSE}"
        for c in m.tool_calls or []
    ]
    return "\n".join(blocks)


def template_messages(
    messages: list[ChatMessage], tools: list[dict[str, Any]], *, native: bool
) -> list[dict[str, Any]]:
    """The messages as the chat template reads them; `native` for a template that renders
    tools itself (see :func:`knows_tools`), else in the hermes form described above."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "assistant" and native:
            d: dict[str, Any] = {"role": "assistant", "content": m.content or ""}
            if m.reasoning_content:
                d["reasoning_content"] = m.reasoning_content
            if m.tool_calls:
                d["tool_calls"] = [
                    {
                        "type": "function",
                        "id": c.id,
                        "function": {
                            "name": c.function.name,
                            "arguments": _arguments(c.function.arguments),
                        },
                    }
                    for c in m.tool_calls
                ]
            out.append(d)
        elif m.role == "assistant":
            parts = []
            if m.reasoning_content:
                parts.append(think_block(m.reasoning_content))
            if m.content:
                parts.append(m.content)
            if m.tool_calls:
                parts.append(_call_text(m))
            out.append({"role": "assistant", "content": "\n\n".join(parts)})
        elif m.role == "tool":
            d = {"role": "tool", "content": m.content or ""}
            if native:
                d["tool_call_id"] = m.tool_call_id or ""
                if m.name:
                    d["name"] = m.name
            out.append(d)
        else:
            out.append({"role": m.role, "content": m.content or ""})
    if not native and tools:
        described = _TOOLS_PREAMBLE + "\n".join(
            json.dumps(t, ensure_ascii=False) for t in tools
        ) + _TOOLS_CALL_FORM
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": f"{out[0]['content']}\n\n{described}"}
        else:
            out.insert(0, {"role": "system", "content": described})
    return out


def render_prompt(
    tokenizer: Any,
    messages: list[ChatMessage],
    tools: list[dict[str, Any]],
    template_kwargs: dict[str, Any],
) -> str:
    """The prompt text for the next assistant turn, generation header included."""
    template = tokenizer.chat_template
    if not isinstance(template, str):  # several named templates: the default one
        template = (template or {}).get("default", "") if isinstance(template, dict) else ""
    native = knows_tools(template)
    return str(
        tokenizer.apply_chat_template(
            template_messages(messages, tools, native=native),
            tools=tools if native and tools else None,
            add_generation_prompt=True,
            tokenize=False,
            **template_kwargs,
        )
    )
