"""The miner's HTTP app: ``POST /step``, ``GET /card`` (both signed) and ``GET /health``.

Every signed request passes, in this order, and nothing reaches the policy before all pass:

1. body size — over the limit is 413, decided from ``Content-Length`` or while streaming,
   before a byte is parsed;
2. ``bittensor.http_auth`` — header shape, receiver (this miner's hotkey), freshness,
   signature, then replay against a nonce store: any failure is 401;
3. the caller's standing (:class:`CallerGate`) — 403 with the reason;
4. the body as a :class:`StepRequest` — 422 with the first errors;
5. a slot by stake priority (:class:`PriorityAdmission`) — 503 when refused or evicted;
6. the policy — 504 when the wait for a slot and the policy together pass the request's
   ``deadline_ms``, 500 if the policy raises or returns a message breaking the limits.

A request that passed steps 1-4 is told to the app's :class:`StepObserver`, if it has one
(the miner's episode log), with the reply or the reason it got none.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from typing import Any, Protocol

from bittensor import http_auth
from fastapi import FastAPI, Request, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shopbench.agents.base import Policy
from shopbench.chat import MAX_REQUEST_BYTES, AssistantMessage
from template.protocol import (
    PROTOCOL_VERSION,
    AgentCard,
    StepRequest,
    StepResponse,
    WireAssistantMessage,
)
from template.transport.admission import Overloaded, PriorityAdmission
from template.transport.standing import CallerGate, Forbidden

log = logging.getLogger("template.transport.server")
JSON = "application/json"


class StepObserver(Protocol):
    """Told of every checked step: its caller, the request, and the reply or the reason
    there was none (``overloaded``, ``deadline``, ``policy_failed``, ``invalid_message``).
    It must not raise."""

    def seen(
        self,
        validator: str,
        request: StepRequest,
        reply: AssistantMessage | None = None,
        failed: str | None = None,
    ) -> None: ...


class MinerAppConfig(BaseModel):
    """Limits of the miner app; the defaults are the protocol's."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_request_bytes: int = Field(
        default=MAX_REQUEST_BYTES, ge=1024, description="largest request body accepted"
    )
    max_age_s: float = Field(
        default=http_auth.DEFAULT_MAX_AGE, gt=0, description="how old a signed request may be"
    )
    allowed_skew_s: float = Field(
        default=http_auth.DEFAULT_ALLOWED_SKEW,
        ge=0,
        description="how far in the future a request's nonce may be (clock drift)",
    )
    max_active: int = Field(default=8, ge=1, description="steps the policy runs at once")
    max_waiting: int = Field(default=64, ge=0, description="steps queued when all slots busy")


def _error(
    status: int, reason: str, detail: str, headers: dict[str, str] | None = None
) -> Response:
    """A JSON error reply: ``{"error": reason, "detail": detail}``."""
    body = json.dumps({"error": reason, "detail": detail}).encode()
    return Response(body, status_code=status, media_type=JSON, headers=headers)


class _TooLarge(Exception):
    pass


async def _read_capped(request: Request, limit: int) -> bytes:
    """The raw body, or _TooLarge as soon as it is known to exceed `limit` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _TooLarge(f"Content-Length {declared} is over the {limit}-byte limit")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _TooLarge(f"body is over the {limit}-byte limit")
        chunks.append(chunk)
    return b"".join(chunks)


def _validation_summary(error: ValidationError, limit: int = 3) -> str:
    """The first few validation errors as 'loc: message' pairs."""
    parts = []
    for item in error.errors(include_url=False, include_input=False)[:limit]:
        loc = ".".join(str(p) for p in item["loc"]) or "body"
        parts.append(f"{loc}: {item['msg']}")
    return "; ".join(parts)


def create_miner_app(
    policy: Policy,
    card: AgentCard,
    hotkey: str,
    gate: CallerGate,
    config: MinerAppConfig | None = None,
    nonce_store: http_auth.NonceStore | None = None,
    observer: StepObserver | None = None,
) -> FastAPI:
    """A FastAPI app serving `policy` as the miner whose hotkey address is `hotkey`.

    `gate` decides who is served; `nonce_store` (default: a fresh in-memory store covering
    the freshness window) must be shared by all processes behind one hotkey; `observer` is
    told of every step that passed the checks.
    ``app.state.rejections`` counts refusals by reason and ``app.state.served`` the steps
    answered, so operators and tests can see what reached the policy.
    """
    cfg = config or MinerAppConfig()
    window = cfg.max_age_s + cfg.allowed_skew_s
    store = nonce_store or http_auth.InMemoryNonceStore(retention=max(60.0, window))
    admission = PriorityAdmission(cfg.max_active, cfg.max_waiting)
    app = FastAPI(title="shopbench miner", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.rejections = Counter()
    app.state.served = 0
    app.state.admission = admission

    def reject(status: int, reason: str, detail: str, **headers: str) -> Response:
        app.state.rejections[reason] += 1
        log.info("rejected %s: %s", reason, detail)
        return _error(status, reason, detail, headers or None)

    async def authenticate(request: Request) -> tuple[bytes, str, float] | Response:
        """Steps 1-3: the body, the caller's hotkey and its priority; or the refusal."""
        try:
            body = await _read_capped(request, cfg.max_request_bytes)
        except _TooLarge as e:
            return reject(413, "too_large", str(e), Connection="close")
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        try:
            caller = http_auth.verify(
                request.headers,
                body,
                method=request.method,
                path=target,
                self_hotkey_ss58=hotkey,
                max_age=cfg.max_age_s,
                allowed_skew=cfg.allowed_skew_s,
                nonce_store=store,
            )
        except http_auth.AuthError as e:
            return reject(401, type(e).__name__, str(e))
        try:
            priority = gate.admit(caller.hotkey_ss58)
        except Forbidden as e:
            return reject(403, "forbidden", str(e))
        return body, caller.hotkey_ss58, priority

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "protocol_version": PROTOCOL_VERSION, "hotkey": hotkey}

    @app.get("/card")
    async def get_card(request: Request) -> Response:
        checked = await authenticate(request)
        if isinstance(checked, Response):
            return checked
        return Response(card.model_dump_json(), media_type=JSON)

    @app.post("/step")
    async def step(request: Request) -> Response:
        checked = await authenticate(request)
        if isinstance(checked, Response):
            return checked
        body, caller, priority = checked
        try:
            req = StepRequest.model_validate_json(body)
        except ValidationError as e:
            return reject(422, "invalid_request", _validation_summary(e))

        def failed(status: int, reason: str, detail: str, **headers: str) -> Response:
            if observer is not None:
                observer.seen(caller, req, failed=reason)
            return reject(status, reason, detail, **headers)

        try:
            # The deadline covers the wait for a slot too: past it the validator has gone.
            async with asyncio.timeout(req.deadline_ms / 1000), admission.slot(priority):
                message = await policy.act(req.chat_messages(), req.tool_dicts())
        except Overloaded as e:
            return failed(503, "overloaded", str(e), **{"Retry-After": "1"})
        except TimeoutError:
            return failed(504, "deadline", f"the policy took over {req.deadline_ms} ms")
        except Exception as e:  # a policy bug must cost one reply, never the server
            log.exception("policy %s failed on %s turn %d", policy.name, req.episode_id, req.turn)
            return failed(500, "policy_failed", f"the policy raised {type(e).__name__}")
        try:
            reply = StepResponse(
                message=WireAssistantMessage.from_assistant(message), model=card.model
            )
        except ValidationError as e:
            return failed(500, "invalid_message", _validation_summary(e))
        if observer is not None:
            observer.seen(caller, req, reply=message)
        app.state.served += 1
        log.debug("served %s turn %d for %s", req.episode_id, req.turn, caller)
        return Response(reply.model_dump_json(exclude_none=True), media_type=JSON)

    return app
