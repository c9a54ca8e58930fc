"""The agent layer's exception family: :class:`AgentError` and the ways a policy cannot be
built or played."""

from __future__ import annotations

from shopbench.errors import ShopbenchError


class AgentError(ShopbenchError):
    """A policy cannot be built or played; the root of the agent layer's errors."""


class PolicySpecError(AgentError):
    """A policy spec names no known policy, or an OpenAI spec is malformed."""


class PolicyOptionsError(AgentError):
    """Policy options are refused: a config file's key or value, a template argument, or
    options given where no model policy (hf:, openai:) is named."""


class LocalModelError(AgentError):
    """A local model directory cannot be played: missing, no weights, no chat template."""


class PlayInputError(AgentError):
    """A typed line is not a tool call (bad quoting, or a word without key=value)."""


class PlayerQuit(AgentError):
    """The person typed quit, or the input ended: the episode stops without a terminate."""
