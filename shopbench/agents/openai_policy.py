"""A policy backed by any OpenAI-compatible chat endpoint that supports tools.

Written for vLLM serving Qwen3 (``--enable-auto-tool-choice --tool-call-parser hermes
--reasoning-parser qwen3``), and just as happy with any server speaking the chat-completions
API. The model's reasoning is kept: read from ``reasoning_content`` (or ``reasoning``), or
split out of ``<think>...</think>`` in the content when the server has no reasoning parser;
tool calls written as hermes ``<tool_call>`` text are read when the server has no tool
parser. Earlier reasoning goes back to the server in the form the chat template expects.

Requests go through the shared :class:`~shopbench.openai_compat.client.OpenAIClient`: its
failures are ``EndpointTimeout`` (also a ``TimeoutError``), ``EndpointError`` (refused,
unreachable, an HTTP error status) and ``MalformedReply`` (a body that is not a chat
completion), all of :mod:`shopbench.openai_compat.errors`. Transient ones are
retried — after the server's ``Retry-After`` when it sends one, else with backoff and jitter
— before they are raised.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError

from shopbench.chat import AssistantMessage, ChatMessage
from shopbench.openai_compat.client import OpenAIClient, Sleep
from shopbench.openai_compat.config import EndpointSettings
from shopbench.openai_compat.errors import MalformedReply
from shopbench.openai_compat.urls import chat_url

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
_THINK = re.compile(r"^\s*(?:<think>)?(.*?)</think>\s*", re.DOTALL)
_TOOL_CALL_TEXT = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
_MAX_CONNECTIONS = 100  # httpx's own default pool size, which the policy always had


class OpenAIPolicyConfig(EndpointSettings):
    """How to talk to one OpenAI-compatible endpoint."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(min_length=1, description="model name the server serves")
    base_url: str = Field(description="API root, e.g. http://localhost:8000/v1")
    api_key: str | None = Field(default=None, description="sent as a bearer token if set")
    temperature: float | None = Field(default=0.6, ge=0, description="sampling temperature")
    top_p: float | None = Field(default=0.95, gt=0, le=1, description="nucleus sampling")
    max_tokens: int | None = Field(default=8192, ge=1, description="tokens per reply")
    seed: int | None = Field(default=None, description="sampling seed, when the server takes one")
    request_timeout_s: float = Field(default=300.0, gt=0, description="seconds per request")
    reasoning_history: Literal["think", "field", "drop"] = Field(
        default="think",
        description="earlier reasoning sent back as <think> in the content (what Qwen3's "
        "chat template reads), as a reasoning_content field, or not at all",
    )
    extra_body: dict[str, Any] = Field(
        default_factory=dict, description="more request fields, e.g. chat_template_kwargs"
    )

    @property
    def chat_url(self) -> str:
        """The chat-completions URL: the base URL (``/v1`` added when it has no path)."""
        return chat_url(self.base_url)


class OpenAIPolicy:
    """An agent whose turns come from a chat-completions endpoint.

    One instance may serve many concurrent episodes; it keeps one connection pool per
    event loop. `sleep` waits between retries (``asyncio.sleep`` unless a test injects
    another). Call :meth:`aclose` when done with it.
    """

    def __init__(self, config: OpenAIPolicyConfig, *, sleep: Sleep | None = None) -> None:
        self.config = config
        self.name = f"openai:{config.model}"
        self._client = OpenAIClient(config.client_config(_MAX_CONNECTIONS), sleep=sleep)

    async def act(
        self, messages: list[ChatMessage], tools: list[dict[str, Any]]
    ) -> AssistantMessage:
        """Ask the endpoint for the next turn and return it as an assistant message.

        Raises EndpointTimeout, EndpointError or MalformedReply once the retries are spent.
        A reply over the message size limits is returned as it came (unvalidated), so the
        episode loop can tell the agent.
        """
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": [self._outgoing(m) for m in messages],
            **self.config.extra_body,
        }
        if tools:
            body["tools"] = tools
            body["tool_choice"] = "auto"
        for name in ("temperature", "top_p", "max_tokens", "seed"):
            value = getattr(self.config, name)
            if value is not None:
                body.setdefault(name, value)
        data = await self._client.chat(self.config.base_url, body, api_key=self.config.api_key)
        return parse_completion(data)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()

    # -- request -----------------------------------------------------------------------------

    def _outgoing(self, m: ChatMessage) -> dict[str, Any]:
        out: dict[str, Any] = {"role": m.role, "content": m.content}
        if m.role == "assistant":
            if m.tool_calls:
                out["tool_calls"] = [c.model_dump() for c in m.tool_calls]
            reasoning = m.reasoning_content
            if reasoning and self.config.reasoning_history == "think":
                out["content"] = f"<think>\n{reasoning}\n</think>\n\n{m.content or ''}"
            elif reasoning and self.config.reasoning_history == "field":
                out["reasoning_content"] = reasoning
        elif m.role == "tool":
            out["tool_call_id"] = m.tool_call_id or ""
            out["content"] = m.content or ""
        return out


# -- reply ----------------------------------------------------------------------------------


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
    hermes parser reads it), so a complete call runs and a cut one is refused. A local
    model's generation is read by this same function.
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
    if reasoning is None and content and "</think>" in content:
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
    fields = {
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
