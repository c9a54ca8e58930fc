"""The judge's HTTP side: chat completions and the model list, with bounded retries.

Failures become :class:`~shopbench.judging.llm.errors.JudgeUnavailable` with a kind:
timeouts, refused connections, 5xx and bodies that are not JSON are transient and retried
with exponential backoff; a 429 is retried after the server's ``Retry-After`` when it gives
one (capped); other 4xx are not retried. The wait is injectable so tests never sleep.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from shopbench.judging.llm.config import Endpoint, LLMJudgeConfig
from shopbench.judging.llm.errors import FailureKind, JudgeUnavailable

Sleep = Callable[[float], Awaitable[None]]
"""Waits the given seconds (``asyncio.sleep`` unless a test injects another)."""

_TOO_LONG = ("context length", "maximum context", "too long", "max_model_len")
_SERVER_ERRORS = frozenset({408, 409, 425, 500, 502, 503, 504})
_SNIPPET = 200  # characters of an error body quoted in a failure message


class Failure(JudgeUnavailable):
    """One failed request; `retry_after` is the server's requested wait, if it gave one."""

    def __init__(
        self, kind: FailureKind, message: str, *, transient: bool, retry_after: float | None = None
    ) -> None:
        super().__init__(kind, message, transient=transient)
        self.retry_after = retry_after
        self.status: int | None = None
        self.body = ""


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None  # an HTTP date: rare from model servers; the own backoff applies
    return seconds if seconds >= 0 else None


class JudgeClient:
    """Posts chat completions and reads ``/v1/models`` for the judge.

    Keeps one connection pool per event loop (a pool is bound to the loop that made it);
    :meth:`aclose` closes the current one.
    """

    def __init__(self, config: LLMJudgeConfig, sleep: Sleep | None = None) -> None:
        self.config = config
        self._sleep: Sleep = sleep or asyncio.sleep
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _http(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            timeout = httpx.Timeout(
                self.config.request_timeout_s, connect=self.config.connect_timeout_s
            )
            limits = httpx.Limits(max_connections=self.config.concurrency * 4)
            self._client = httpx.AsyncClient(timeout=timeout, limits=limits)
            self._loop = loop
        return self._client

    async def aclose(self) -> None:
        """Close the connection pool of the current loop."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None
            self._loop = None

    async def chat(self, endpoint: Endpoint, body: dict[str, Any]) -> dict[str, Any]:
        """The parsed JSON body of a successful chat completion, after bounded retries.

        Raises :class:`Failure` with the last failure once the retries are spent, or at
        once for a failure that is not transient.
        """
        payload = json.dumps(body, ensure_ascii=False).encode("utf-8")
        return await self._with_retries(
            lambda: self._request("POST", endpoint, endpoint.chat_url, payload)
        )

    async def models(self, endpoint: Endpoint) -> dict[str, Any]:
        """The parsed body of ``GET /v1/models``, after bounded retries."""
        return await self._with_retries(
            lambda: self._request("GET", endpoint, endpoint.models_url, None)
        )

    async def _with_retries(
        self, attempt: Callable[[], Awaitable[dict[str, Any]]]
    ) -> dict[str, Any]:
        cfg = self.config
        delay = cfg.backoff_s
        for n in range(cfg.retries + 1):
            try:
                return await attempt()
            except Failure as e:
                if not e.transient or n == cfg.retries:
                    raise
                wait = e.retry_after if e.retry_after is not None else delay
                await self._sleep(min(wait, cfg.max_backoff_s))
                delay *= 2
        raise AssertionError("unreachable")  # the loop returns or raises

    async def _request(
        self, method: str, endpoint: Endpoint, url: str, payload: bytes | None
    ) -> dict[str, Any]:
        headers = {"Accept": "application/json"}
        if payload is not None:
            headers["Content-Type"] = "application/json"
        if endpoint.api_key:
            headers["Authorization"] = f"Bearer {endpoint.api_key}"
        cap = self.config.max_response_bytes
        try:
            async with self._http().stream(method, url, content=payload, headers=headers) as r:
                chunks: list[bytes] = []
                size = 0
                async for chunk in r.aiter_bytes():
                    size += len(chunk)
                    if size > cap:
                        raise Failure("bad_reply", f"{url}: reply over {cap} bytes",
                                      transient=False)
                    chunks.append(chunk)
                status, retry_after = r.status_code, r.headers.get("retry-after")
        except httpx.TimeoutException:
            raise Failure(
                "timeout", f"{url}: no reply within {self.config.request_timeout_s:g} s",
                transient=True,
            ) from None
        except httpx.HTTPError as e:
            raise Failure(
                "down", f"{url}: {type(e).__name__}: {e or 'unreachable'}", transient=True
            ) from None
        raw = b"".join(chunks)
        if status >= 400:
            text = raw[:_SNIPPET].decode("utf-8", errors="replace").strip()
            if status == 429:
                failure = Failure("rate_limited", f"{url}: HTTP 429: {text}", transient=True,
                                  retry_after=_retry_after(retry_after))
            elif status in _SERVER_ERRORS or status >= 500:
                failure = Failure("down", f"{url}: HTTP {status}: {text}", transient=True)
            elif any(w in text.lower() for w in _TOO_LONG):
                failure = Failure("too_long", f"{url}: HTTP {status}: {text}", transient=False)
            else:
                failure = Failure("rejected", f"{url}: HTTP {status}: {text}", transient=False)
            failure.status = status
            failure.body = raw.decode("utf-8", errors="replace")
            raise failure
        try:
            data = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            snippet = raw[:80].decode("utf-8", errors="replace")
            # A proxy's error page or a cut connection: worth another try.
            raise Failure("bad_reply", f"{url}: reply is not JSON ({snippet!r})",
                          transient=True) from None
        if not isinstance(data, dict):
            raise Failure("bad_reply", f"{url}: reply is {type(data).__name__}, not an object",
                          transient=True)
        return data
