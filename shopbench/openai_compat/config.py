"""How an :class:`~shopbench.openai_compat.client.OpenAIClient` talks to its servers.

The client has no defaults of its own. Each component that uses it (the policy, the LLM
judge, the paraphraser) has a config deriving from :class:`EndpointSettings`, redeclaring
only the defaults it changes, and builds its :class:`ClientConfig` with
:meth:`EndpointSettings.client_config`.
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


class EndpointSettings(BaseModel):
    """The timeouts, retries and reply cap a component declares for its endpoint.

    A component's config derives from this and redeclares a field only to change its
    default, so each setting is described and bounded once.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    request_timeout_s: float = Field(default=120.0, gt=0, description="seconds per request")
    connect_timeout_s: float = Field(default=10.0, gt=0, description="seconds to connect")
    retries: int = Field(default=2, ge=0, description="retries of a transient failure")
    backoff_s: float = Field(default=0.5, ge=0, description="first retry delay; doubles")
    max_backoff_s: float = Field(
        default=20.0, ge=0, description="longest wait between tries, a server's Retry-After too"
    )
    jitter: float = Field(
        default=0.1, ge=0, le=1,
        description="up to this fraction of each backoff wait is taken off at random, so "
        "clients failing together do not retry together; 0: the exact doubling",
    )  # fmt: skip
    max_response_bytes: int = Field(default=4 << 20, ge=1024, description="reply size cap")

    def client_config(self, max_connections: int) -> ClientConfig:
        """The client's settings: these timeouts, retries and cap, and a pool of
        `max_connections`."""
        shared = {name: getattr(self, name) for name in EndpointSettings.model_fields}
        return ClientConfig(**shared, max_connections=max_connections)
