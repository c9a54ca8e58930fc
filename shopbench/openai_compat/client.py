"""The one HTTP client for OpenAI-compatible servers: chat completions and the model list.

Used by the OpenAI-compatible policy, the LLM judge and the paraphraser. Async httpx, one
connection pool per event loop (a pool belongs to the loop that made it). Every request gets
bounded retries: a transient failure (see :mod:`shopbench.openai_compat.errors`) is tried
again after the server's ``Retry-After`` when it sent one (seconds or an HTTP date), else
after an exponential backoff with jitter, every wait capped; the `sleep` that waits is
injectable, so tests record the waits instead of sleeping. Once the retries are spent, or at
once for a failure that is not transient, the last failure is raised.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from shopbench.openai_compat.config import ClientConfig
from shopbench.openai_compat.errors import (
    EndpointError,
    EndpointFailure,
    EndpointFailureKind,
    EndpointTimeout,
    MalformedReply,
)
from shopbench.openai_compat.retry import Backoff, parse_retry_after
from shopbench.openai_compat.urls import chat_url, models_url

Sleep = Callable[[float], Awaitable[None]]
"""Waits the given seconds (``asyncio.sleep`` unless a test injects another)."""

_TRANSIENT_4XX = frozenset({408, 409, 425, 429})
_TOO_LONG = ("context length", "maximum context", "too long", "max_model_len")
_SNIPPET = 300  # bytes of an error body quoted in a failure message


class OpenAIClient:
    """Posts chat completions and reads ``/v1/models``, with bounded retries.

    One instance may serve many concurrent requests and several servers (each call names
    its base URL and bearer token). Call :meth:`aclose` from the loop that used it last.
    """

    def __init__(
        self, config: ClientConfig, *, sleep: Sleep | None = None,
        rng: random.Random | None = None,
    ) -> None:  # fmt: skip
        self.config = config
        self._sleep: Sleep = sleep or asyncio.sleep
        self._rng = rng or random.Random()
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def chat(
        self, base_url: str, body: dict[str, Any], *, api_key: str | None = None
    ) -> dict[str, Any]:
        """The JSON object a chat completion at `base_url` answered `body` with.

        Raises :class:`EndpointError`, :class:`EndpointTimeout` or :class:`MalformedReply`
        once the retries are spent (at once when the failure is not transient).
        """
        payload = json.dumps(body, ensure_ascii=False).encode("utf-8")
        url = chat_url(base_url)
        return await self._with_retries(lambda: self._request("POST", url, payload, api_key))

    async def models(self, base_url: str, *, api_key: str | None = None) -> dict[str, Any]:
        """The JSON object ``GET /v1/models`` at `base_url` answered, after bounded retries."""
        url = models_url(base_url)
        return await self._with_retries(lambda: self._request("GET", url, None, api_key))

    async def aclose(self) -> None:
        """Close the connection pool of the current loop."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None
            self._loop = None

    def _http(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            cfg = self.config
            timeout = httpx.Timeout(cfg.request_timeout_s, connect=cfg.connect_timeout_s)
            limits = httpx.Limits(max_connections=cfg.max_connections)
            self._client = httpx.AsyncClient(timeout=timeout, limits=limits)
            self._loop = loop
        return self._client

    async def _with_retries(
        self, attempt: Callable[[], Awaitable[dict[str, Any]]]
    ) -> dict[str, Any]:
        backoff = Backoff(self.config, self._rng)
        for n in range(self.config.retries + 1):
            try:
                return await attempt()
            except EndpointFailure as e:
                if not e.transient or n == self.config.retries:
                    raise
                await self._sleep(backoff.next_wait(e.retry_after))
        raise AssertionError("unreachable")  # the loop returns or raises

    async def _request(
        self, method: str, url: str, payload: bytes | None, api_key: str | None
    ) -> dict[str, Any]:
        headers = {"Accept": "application/json"}
        if payload is not None:
            headers["Content-Type"] = "application/json"
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        cap = self.config.max_response_bytes
        try:
            async with self._http().stream(method, url, content=payload, headers=headers) as r:
                chunks: list[bytes] = []
                size = 0
                async for chunk in r.aiter_bytes():
                    size += len(chunk)
                    if size > cap:
                        raise MalformedReply(f"{url}: reply over {cap} bytes")
                    chunks.append(chunk)
                status, retry_after = r.status_code, r.headers.get("retry-after")
        except httpx.TimeoutException:
            raise EndpointTimeout(
                f"{url}: no reply within {self.config.request_timeout_s:g} s", transient=True
            ) from None
        except httpx.HTTPError as e:
            raise EndpointError(
                f"{url}: {type(e).__name__}: {e or 'unreachable'}", transient=True
            ) from None
        raw = b"".join(chunks)
        if status >= 400:
            raise _status_failure(url, status, raw, parse_retry_after(retry_after))
        try:
            data = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            snippet = raw[:80].decode("utf-8", errors="replace")
            # A proxy's error page or a cut connection: worth another try.
            raise MalformedReply(
                f"{url}: reply is not JSON ({snippet!r})", transient=True
            ) from None
        if not isinstance(data, dict):
            raise MalformedReply(
                f"{url}: reply is {type(data).__name__}, not an object", transient=True
            )
        return data


def _status_failure(
    url: str, status: int, raw: bytes, retry_after: float | None
) -> EndpointError:
    """The failure an error status stands for (see :mod:`shopbench.openai_compat.errors`)."""
    text = raw[:_SNIPPET].decode("utf-8", errors="replace").strip()
    message = f"{url}: HTTP {status}: {text}"
    body = raw.decode("utf-8", errors="replace")
    kind: EndpointFailureKind
    if status == 429:
        kind, transient = "rate_limited", True
    elif status in _TRANSIENT_4XX or status >= 500:
        kind, transient = "down", True
    elif any(w in text.lower() for w in _TOO_LONG):
        kind, transient = "too_long", False
    else:
        kind, transient = "rejected", False
    return EndpointError(
        message, kind=kind, transient=transient, status=status, body=body,
        retry_after=retry_after if transient else None,
    )
