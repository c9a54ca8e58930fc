"""How an :class:`~shopbench.openai_compat.client.OpenAIClient` talks to its servers.

The client has no defaults of its own: each component that uses it (the policy, the LLM
judge, the paraphraser) declares its timeouts and retry settings in its own config and
builds a :class:`ClientConfig` from them.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ClientConfig(BaseModel):
    """Timeouts, retries, caps and pool size of one OpenAI-compatible client."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    request_timeout_s: float = Field(gt=0, description="seconds one request may take")
    connect_timeout_s: float = Field(gt=0, description="seconds to open a connection")
    retries: int = Field(ge=0, description="more tries after a transient failure")
    backoff_s: float = Field(ge=0, description="wait before the first retry; doubles per try")
    max_backoff_s: float = Field(
        ge=0, description="longest wait between tries, a server's Retry-After included"
    )
    jitter: float = Field(
        ge=0, le=1,
        description="up to this fraction of each backoff wait is taken off at random, so "
        "clients failing together do not retry together; 0: the exact doubling (a server's "
        "Retry-After is always waited in full)",
    )  # fmt: skip
    max_response_bytes: int = Field(ge=1024, description="largest reply body read")
    max_connections: int = Field(ge=1, description="connections the pool opens at most")
