"""The failures of an OpenAI-compatible endpoint, one family for every caller.

:class:`EndpointFailure` is the base; each failure carries a `kind` (what happened, in the
terms the LLM judge records), whether it is `transient` (worth another try), and, when the
server answered, its `status`, `body` and requested `retry_after`:

- :class:`EndpointError` — the endpoint is unavailable: refused or unreachable (``down``),
  an error status (``down`` for 408/409/425/5xx, ``rate_limited`` for 429, ``too_long``
  for a 4xx saying the context is exceeded, ``rejected`` for any other 4xx).
- :class:`EndpointTimeout` — no reply within the request timeout (``timeout``); also a
  ``TimeoutError``, so the episode loop records it as the policy's timeout.
- :class:`MalformedReply` — the endpoint answered, but not with what was asked for: a body
  that is not JSON or not an object, one over the size cap, a completion without a message
  (``bad_reply``).

:class:`~shopbench.openai_compat.client.OpenAIClient` retries the transient ones with
backoff and raises the last; callers keep these classes (the policy) or translate them into
their own boundary's family (the judge's ``JudgeUnavailable``).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from shopbench.errors import ShopbenchError

EndpointFailureKind = Literal[
    "down", "timeout", "rate_limited", "rejected", "too_long", "bad_reply"
]
"""What went wrong, in the terms the LLM judge records (see the module docstring)."""


class EndpointFailure(ShopbenchError):
    """One failed request to an OpenAI-compatible endpoint (see the module docstring)."""

    default_kind: ClassVar[EndpointFailureKind] = "down"

    def __init__(
        self,
        message: str,
        *,
        kind: EndpointFailureKind | None = None,
        transient: bool = False,
        status: int | None = None,
        body: str = "",
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.kind: EndpointFailureKind = kind or self.default_kind
        self.transient = transient
        self.status = status
        self.body = body
        self.retry_after = retry_after


class EndpointError(EndpointFailure):
    """The endpoint refused the request, could not be reached, or answered an error status."""


class EndpointTimeout(EndpointFailure, TimeoutError):
    """The endpoint did not answer within the request timeout."""

    default_kind = "timeout"


class MalformedReply(EndpointFailure):
    """The endpoint answered, but not with a chat completion (or a model list)."""

    default_kind = "bad_reply"
