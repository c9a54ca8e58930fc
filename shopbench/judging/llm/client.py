"""The judge's HTTP side: the shared OpenAI-compatible client, its failures in the judge's terms.

Requests go through :class:`~shopbench.openai_compat.client.OpenAIClient` with the judge's
timeouts and retries: timeouts, refused connections, 5xx and bodies that are not JSON are
transient and retried with exponential backoff; a 429 (or 503) is retried after the
server's ``Retry-After`` when it gives one (capped); other 4xx are not retried. The wait is
injectable so tests never sleep. A failure reaches the judge as
:class:`~shopbench.judging.errors.Failure`, a
:class:`~shopbench.judging.errors.JudgeUnavailable` with the same kind.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from shopbench.judging.errors import Failure
from shopbench.judging.llm.config import Endpoint, LLMJudgeConfig
from shopbench.openai_compat.client import OpenAIClient, Sleep
from shopbench.openai_compat.errors import EndpointFailure

__all__ = ["JudgeClient", "Sleep"]


class JudgeClient:
    """Posts chat completions and reads ``/v1/models`` for the judge.

    Keeps one connection pool per event loop (a pool is bound to the loop that made it);
    :meth:`aclose` closes the current one.
    """

    def __init__(self, config: LLMJudgeConfig, sleep: Sleep | None = None) -> None:
        self.config = config
        # a pool of 4 connections per request slot
        self._client = OpenAIClient(config.client_config(config.concurrency * 4), sleep=sleep)

    async def aclose(self) -> None:
        """Close the connection pool of the current loop."""
        await self._client.aclose()

    async def chat(self, endpoint: Endpoint, body: dict[str, Any]) -> dict[str, Any]:
        """The parsed JSON body of a successful chat completion, after bounded retries.

        Raises :class:`~shopbench.judging.errors.Failure` with the last failure once the
        retries are spent, or at once for a failure that is not transient.
        """
        return await _judged(self._client.chat(endpoint.base_url, body, api_key=endpoint.api_key))

    async def models(self, endpoint: Endpoint) -> dict[str, Any]:
        """The parsed body of ``GET /v1/models``, after bounded retries."""
        return await _judged(self._client.models(endpoint.base_url, api_key=endpoint.api_key))


async def _judged(request: Awaitable[dict[str, Any]]) -> dict[str, Any]:
    try:
        return await request
    except EndpointFailure as e:
        raise Failure(e) from None
