"""What stands between a client and the service: a per-client rate limit, a cap on the
query string, and the response headers that keep miner-written text inert in a browser.

Both are plain ASGI middleware, so they answer before any route (or any DuckDB work) runs.
The rate limit is a token bucket per client address: ``burst`` requests at once, refilled at
``rate_per_s``; a request finding the bucket empty is answered 429 with ``Retry-After`` (the
seconds until a token is back). The address is the ASGI scope's client: the socket's peer,
or the client named in X-Forwarded-For when the peer is one of ``ApiConfig.trusted_proxies``
(uvicorn decides, :func:`~shopbench.traces.api.server.proxy_options`); a client never
chooses its own bucket. Every page carries a Content-Security-Policy that allows
only the service's own scripts and styles, no inline script or style, no frames, no other
origin — so even text that escaping missed could not run.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

Scope = dict[str, Any]

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
"""The policy of every page and answer but the OpenAPI explorer."""
DOCS_CSP = (
    "default-src 'none'; script-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net; "
    "style-src 'self' https://cdn.jsdelivr.net; img-src 'self' data: https://fastapi.tiangolo.com; "
    "connect-src 'self'; base-uri 'none'; frame-ancestors 'none'"
)
"""``/docs`` and ``/redoc`` load FastAPI's explorer from its CDN; they show no archived text."""
_DOCS = ("/docs", "/redoc")
_MAX_CLIENTS = 100_000


async def _answer(
    send: Any, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]]
) -> None:
    data = json.dumps(body).encode()
    await send({
        "type": "http.response.start", "status": status,
        "headers": [(b"content-type", b"application/json"),
                    (b"content-length", str(len(data)).encode()), *headers],
    })  # fmt: skip
    await send({"type": "http.response.body", "body": data})


class TokenBuckets:
    """One token bucket per client key (thread-safe); the oldest idle buckets are dropped
    past a bound, so a flood of addresses cannot grow it without end."""

    def __init__(self, rate_per_s: float, burst: int) -> None:
        self.rate = rate_per_s
        self.burst = burst
        self._lock = threading.Lock()
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def take(self, key: str, now: float | None = None) -> float:
        """Take one token for `key`: 0 when granted, else the seconds until one is back."""
        now = time.monotonic() if now is None else now
        with self._lock:
            tokens, last = self._buckets.pop(key, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - last) * self.rate)
            wait = 0.0
            if tokens >= 1:
                tokens -= 1
            else:
                wait = (1 - tokens) / self.rate
            self._buckets[key] = (tokens, now)
            while len(self._buckets) > _MAX_CLIENTS:
                self._buckets.popitem(last=False)
            return wait


class Guard:
    """The ASGI middleware: query-string cap (414), rate limit (429), security headers."""

    def __init__(
        self,
        app: Any,
        *,
        rate_per_s: float,
        burst: int,
        max_query_chars: int,
        extra_headers: Callable[[], list[tuple[bytes, bytes]]] | None = None,
    ) -> None:
        self.app = app
        self.extra_headers = extra_headers
        self.buckets = TokenBuckets(rate_per_s, burst)
        self.max_query_chars = max_query_chars

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _security_headers(scope["path"])
        if self.extra_headers is not None:
            headers += self.extra_headers()
        query = scope.get("query_string", b"")
        if len(query) > self.max_query_chars or len(scope.get("raw_path", b"")) > 1024:
            await _answer(send, 414, {"detail": (
                f"the query string is {len(query)} bytes; the limit is {self.max_query_chars}"
            )}, headers)  # fmt: skip
            return
        client = scope.get("client") or ("unknown", 0)
        wait = self.buckets.take(str(client[0]))
        if wait > 0:
            retry = max(1, math.ceil(wait))
            await _answer(
                send, 429, {"detail": f"too many requests; retry in {retry} s"},
                [*headers, (b"retry-after", str(retry).encode())],
            )  # fmt: skip
            return

        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *headers]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _security_headers(path: str) -> list[tuple[bytes, bytes]]:
    csp = DOCS_CSP if path in _DOCS else CSP
    return [
        (b"content-security-policy", csp.encode()),
        (b"x-content-type-options", b"nosniff"),
        (b"referrer-policy", b"no-referrer"),
        (b"x-frame-options", b"DENY"),
        (b"cross-origin-opener-policy", b"same-origin"),
    ]
