"""The validator's client: signed step and card requests to miners, never crashing on a reply.

Connections are pooled and kept alive per miner, in lanes of small ``httpx`` pools (see
:mod:`template.transport.lanes`); a semaphore bounds the requests in flight. Each request
is signed just before it is sent (so waiting for a slot never eats the miner's freshness
window) and bound to the miner's hotkey. The turn's deadline covers connecting, sending and
reading; the reply is read incrementally and abandoned as soon as it passes the byte cap.
Every failure is a :class:`~template.errors.TransportError` subclass naming the miner.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
from typing import Any, TypeVar

import httpx
from bittensor import http_auth
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shopbench.chat import MAX_REQUEST_BYTES, cut_utf8
from shopbench.errors import first_error, first_problem
from shopbench.trajectory.loop import DEFAULT_TURN_TIMEOUT_S
from template.errors import (
    BadStatus,
    ConnectionFailed,
    InvalidReply,
    OversizedReply,
    RequestTooLarge,
    TransportTimeout,
)
from template.protocol import MAX_REPLY_BYTES, AgentCard, StepRequest, StepResponse
from template.transport.lanes import Lanes

ReplyT = TypeVar("ReplyT", bound=BaseModel)
_DETAIL_BYTES = 300  # UTF-8 bytes of an error body quoted in a TransportError


class ClientConfig(BaseModel):
    """Deadlines, caps and pool sizes of the validator's miner client."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    turn_deadline_s: float = Field(
        default=DEFAULT_TURN_TIMEOUT_S, gt=0, le=600, description="time a miner has to answer "
        "one turn",
    )  # fmt: skip
    card_deadline_s: float = Field(default=10.0, gt=0, description="time to answer GET /card")
    connect_timeout_s: float = Field(
        default=5.0, gt=0, description="time to open a connection (within the deadline)"
    )
    max_reply_bytes: int = Field(
        default=MAX_REPLY_BYTES, ge=1024, description="largest reply body read"
    )
    max_concurrency: int = Field(default=64, ge=1, description="requests in flight at once")
    lane_size: int = Field(
        default=4, ge=1, description="requests in flight per connection pool (lane)"
    )
    max_connections: int = Field(default=256, ge=1, description="open connections, over all lanes")
    max_keepalive: int = Field(default=128, ge=0, description="idle connections kept open")
    keepalive_expiry_s: float = Field(default=30.0, gt=0, description="idle connection lifetime")


class MinerEndpoint(BaseModel):
    """Where a miner answers and which hotkey signs for it."""

    model_config = ConfigDict(frozen=True)

    uid: int = Field(ge=0)
    hotkey: str = Field(min_length=1)
    url: str = Field(min_length=1, description="base URL, e.g. http://203.0.113.5:8091")

    @classmethod
    def from_axon(cls, uid: int, hotkey: str, axon: str, scheme: str = "http") -> MinerEndpoint:
        """The endpoint of a metagraph axon ``ip:port`` (IPv6 in brackets)."""
        host, _, port = axon.rpartition(":")
        ipaddress.ip_address(host.strip("[]"))  # ValueError on a malformed axon
        return cls(uid=uid, hotkey=hotkey, url=f"{scheme}://{host}:{int(port)}")

    def __str__(self) -> str:
        return f"uid {self.uid} ({self.url})"


class MinerClient:
    """Signed requests from one validator hotkey to any number of miners.

    `signer` is what ``bittensor.http_auth.sign`` accepts: a ``bittensor.Wallet`` (its
    hotkey signs) or a keypair. `transport` replaces the network (tests only).
    """

    def __init__(
        self,
        signer: Any,
        config: ClientConfig | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.config = cfg = config or ClientConfig()
        self._signer = signer
        self._slots = asyncio.Semaphore(cfg.max_concurrency)
        count = -(-cfg.max_concurrency // cfg.lane_size)
        limits = httpx.Limits(
            max_connections=max(cfg.lane_size, cfg.max_connections // count),
            max_keepalive_connections=cfg.max_keepalive // count,
            keepalive_expiry=cfg.keepalive_expiry_s,
        )
        # One TLS context for every lane: building one costs ~0.15 s (the CA bundle).
        tls = httpx.create_ssl_context()
        self._lanes = Lanes(
            count,
            cfg.lane_size,
            lambda: httpx.AsyncClient(
                limits=limits,
                transport=transport,
                verify=tls,
                follow_redirects=False,
                trust_env=False,
            ),
        )

    async def __aenter__(self) -> MinerClient:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every pooled connection."""
        await self._lanes.aclose()

    async def step(
        self, endpoint: MinerEndpoint, request: StepRequest, *, deadline_s: float | None = None
    ) -> StepResponse:
        """The miner's reply to one turn; a TransportError subclass on any failure.

        The deadline is `deadline_s`, else the request's ``deadline_ms``.
        """
        body = request.model_dump_json(exclude_none=True).encode()
        if len(body) > MAX_REQUEST_BYTES:
            raise RequestTooLarge(
                str(endpoint), f"request is {len(body)} bytes; the limit is {MAX_REQUEST_BYTES}"
            )
        deadline = deadline_s if deadline_s is not None else request.deadline_ms / 1000
        return await self._call(endpoint, "POST", "/step", body, deadline, StepResponse)

    async def card(self, endpoint: MinerEndpoint) -> AgentCard:
        """The miner's agent card; a TransportError subclass on any failure."""
        return await self._call(
            endpoint, "GET", "/card", b"", self.config.card_deadline_s, AgentCard
        )

    async def _call(
        self,
        endpoint: MinerEndpoint,
        method: str,
        path: str,
        body: bytes,
        deadline: float,
        model: type[ReplyT],
    ) -> ReplyT:
        where = str(endpoint)
        async with self._slots:
            try:
                async with asyncio.timeout(deadline):
                    status, data = await self._send(endpoint, method, path, body, deadline)
            except TimeoutError:
                raise TransportTimeout(where, f"no reply within {deadline:g} s") from None
            except httpx.TimeoutException:
                raise TransportTimeout(where, f"no reply within {deadline:g} s") from None
            except httpx.DecodingError as e:
                raise InvalidReply(where, f"undecodable body: {e}") from None
            except (httpx.TransportError, httpx.InvalidURL) as e:
                raise ConnectionFailed(where, f"{type(e).__name__}: {e}".rstrip(": ")) from None
        if status != 200:
            raise BadStatus(where, status, _detail(data))
        try:
            return model.model_validate_json(data)
        except ValidationError as e:
            if first_error(e).kind == "json_invalid":
                raise InvalidReply(where, "reply is not JSON") from None
            why = first_problem(e, default="body")
            raise InvalidReply(where, f"invalid {model.__name__}: {why}") from None

    async def _send(
        self, endpoint: MinerEndpoint, method: str, path: str, body: bytes, deadline: float
    ) -> tuple[int, bytes]:
        """(status, body) of one signed request, reading at most the reply cap."""
        headers = http_auth.sign(
            self._signer, method=method, path=path, body=body, receiver_ss58=endpoint.hotkey
        )
        headers["Content-Type"] = "application/json"
        cap = self.config.max_reply_bytes
        timeout = httpx.Timeout(deadline, connect=min(self.config.connect_timeout_s, deadline))
        url = endpoint.url.rstrip("/") + path
        async with (
            self._lanes.lane(endpoint.url) as http,
            http.stream(method, url, content=body, headers=headers, timeout=timeout) as reply,
        ):
            declared = reply.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > cap:
                raise OversizedReply(str(endpoint), f"reply declares {declared} bytes; cap {cap}")
            data = bytearray()
            async for chunk in reply.aiter_bytes():
                data += chunk
                if len(data) > cap:
                    raise OversizedReply(str(endpoint), f"reply is over the {cap}-byte cap")
            return reply.status_code, bytes(data)


def _detail(data: bytes) -> str:
    """A short, printable excerpt of an error body (its "detail" field when JSON)."""
    try:
        parsed = json.loads(data)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("detail"), str):
        text = f"{parsed.get('error', '')}: {parsed['detail']}".lstrip(": ")
    else:
        text = data[:_DETAIL_BYTES].decode("utf-8", errors="replace")
    return (cut_utf8(text, _DETAIL_BYTES) or "").replace("\n", " ") or "(empty body)"
