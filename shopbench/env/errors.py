"""The environment layer's exception family: why an episode or a tool call failed.

:class:`EnvError` is the root (an environment that cannot be set up: a short episode key, an
unknown system prompt). :class:`ToolError` and its subclasses are what tools raise inside an
episode. Each tool error carries a short `code` recorded in the episode log next to the
message the agent sees; the episode's single boundary
(:meth:`shopbench.env.episode.Episode.call`) turns them into error observations, so none of
them ever leaves an episode.
"""

from __future__ import annotations

from shopbench.errors import ShopbenchError


class EnvError(ShopbenchError):
    """The environment cannot be set up as asked; the root of the environment's errors."""


class ToolError(EnvError):
    """A tool call inside an episode is invalid; the episode turns it into an observation."""


class UnknownToolError(ToolError):
    """The call names a tool this episode does not offer."""

    code = "unknown_tool"


class ArgumentError(ToolError):
    """An argument is missing, unknown, of the wrong type, out of range or too long."""

    code = "bad_argument"


class InvalidIdError(ToolError):
    """A product or shop id that this episode never showed (invented or from another one)."""

    code = "invalid_id"


class LimitError(ToolError):
    """A per-episode limit is spent: turns, calls per turn, ids per call."""

    code = "limit"


class NotAllowedError(ToolError):
    """The call is well formed but not allowed now (a second recommendation)."""

    code = "not_allowed"


class EpisodeOverError(ToolError):
    """The episode has ended; no further call is executed."""

    code = "episode_over"


def error_code(exc: Exception) -> str:
    """The log code of an exception raised during a call (`bad_argument` for search errors)."""
    return getattr(exc, "code", None) or "bad_argument"
