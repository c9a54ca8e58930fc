"""The API's one config: where the archive is, and every limit the service enforces."""

from __future__ import annotations

import ipaddress

from pydantic import BaseModel, ConfigDict, Field, field_validator


class ApiConfig(BaseModel):
    """How ``shopbench traces serve`` serves one archive root."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    root: str = Field(description="the archive root (a store's directory or a pulled folder)")
    page_size: int = Field(default=50, ge=1, description="episodes per page when none is asked")
    max_page_size: int = Field(default=500, ge=1, description="the largest page a client may ask")
    max_query_chars: int = Field(
        default=2048, ge=64, description="longest query string; longer ones are answered 414"
    )
    rate_per_s: float = Field(
        default=20.0, gt=0, description="requests per second one client may sustain"
    )
    burst: int = Field(default=100, ge=1, description="requests one client may make at once")
    refresh_s: float = Field(
        default=5.0, ge=0, description="how stale the list of sealed shards may be (seconds)"
    )
    stream_batch: int = Field(
        default=2000, ge=1, description="episodes read per batch while streaming a bulk read"
    )
    max_eval_samples: int = Field(
        default=1000, ge=1, description="most episodes in one Inspect .eval export"
    )
    threads: int = Field(default=2, ge=1, description="DuckDB threads")
    header_timeout_s: float = Field(
        default=10.0, gt=0, le=600,
        description="seconds a connection has to send a complete request header (from "
        "opening, or from the previous response) before it is answered 408 and closed; "
        "bounds slow-header (slowloris) clients",
    )  # fmt: skip
    keep_alive_s: int = Field(
        default=5, ge=1, le=600,
        description="seconds an idle kept-alive connection is held open between requests",
    )  # fmt: skip
    trusted_proxies: tuple[str, ...] = Field(
        default=(),
        description="addresses or networks (CIDR) of reverse proxies in front of the service; "
        "only a request arriving from one of them has its X-Forwarded-For read as the client "
        "(the address the rate limit counts). None by default: the header is ignored",
    )

    @field_validator("trusted_proxies")
    @classmethod
    def _addresses(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        # uvicorn would also take "*" (every peer), which hands the rate limit to the client
        for entry in value:
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(
                    f"trusted proxy {entry!r} is not an IP address or network such as "
                    "10.0.0.5 or 10.0.0.0/8"
                ) from None
        return value
