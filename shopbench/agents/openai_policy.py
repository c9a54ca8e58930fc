"""A policy backed by any OpenAI-compatible chat endpoint that supports tools.

Written for vLLM serving Qwen3 (``--enable-auto-tool-choice --tool-call-parser hermes
--reasoning-parser qwen3``), and just as happy with any server speaking the chat-completions
API. The model's reasoning is kept: read from ``reasoning_content`` (or ``reasoning``), or
split out of ``<think>...</think>`` in the content when the server has no reasoning parser;
tool calls written as hermes ``<tool_call>`` text are read when the server has no tool
parser (both by :func:`shopbench.agents.format.parse.parse_completion`, the reader of a local
model's generation too). Earlier reasoning goes back to the server in the form the chat
template expects.

Requests go through the shared :class:`~shopbench.openai_compat.client.OpenAIClient`: its
failures are ``EndpointTimeout`` (also a ``TimeoutError``), ``EndpointError`` (refused,
unreachable, an HTTP error status) and ``MalformedReply`` (a body that is not a chat
completion), all of :mod:`shopbench.openai_compat.errors`. Transient ones are
retried — after the server's ``Retry-After`` when it sends one, else with backoff and jitter
— before they are raised.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator

from shopbench.agents.format.markers import THINK_OPEN
from shopbench.agents.format.parse import parse_completion
from shopbench.agents.format.render import think_block
from shopbench.agents.format.views import ObservationView, apply_view, view_tools
from shopbench.chat import AssistantMessage, ChatMessage
from shopbench.openai_compat.client import OpenAIClient, Sleep
from shopbench.openai_compat.config import EndpointSettings
from shopbench.openai_compat.urls import chat_url

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
        description=f"earlier reasoning sent back as {THINK_OPEN} in the content (what Qwen3's "
        "chat template reads), as a reasoning_content field, or not at all",
    )
    extra_body: dict[str, Any] = Field(
        default_factory=dict, description="more request fields, e.g. chat_template_kwargs"
    )
    view: str = Field(
        default="full", description="observation view id the tool results are sent in "
        "(full: the environment's text; compact, compact/h2, ...)",
    )  # fmt: skip

    @field_validator("view")
    @classmethod
    def _view_id(cls, value: str) -> str:
        ObservationView.from_id(value)
        return value

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
        self.view = ObservationView.from_id(config.view)

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
            "messages": [self._outgoing(m) for m in apply_view(messages, self.view, tools)],
            **self.config.extra_body,
        }
        offered = view_tools(tools, self.view)
        if offered:  # (the `tools` prompt names them in the system prompt instead)
            body["tools"] = offered
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
                out["content"] = f"{think_block(reasoning)}\n\n{m.content or ''}"
            elif reasoning and self.config.reasoning_history == "field":
                out["reasoning_content"] = reasoning
        elif m.role == "tool":
            out["tool_call_id"] = m.tool_call_id or ""
            out["content"] = m.content or ""
        return out
