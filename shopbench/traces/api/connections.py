"""A deadline on each request's header: a connection that has not sent a complete request
line and headers within ``header_timeout_s`` is answered 408 and closed.

uvicorn's h11 protocol closes an idle keep-alive connection (``timeout_keep_alive``) but has
no deadline of its own for reading a header: its keep-alive timer is cancelled by the first
byte received, and nothing is armed on a fresh connection, so a client that sends a header
slowly, or part of one and then nothing (slowloris), holds the connection open for ever.
:class:`HeaderDeadlineProtocol` is uvicorn's h11 protocol with one timer more: armed when a
connection opens and again whenever a response completes on a kept-alive connection,
cancelled once h11 has parsed a whole request header. The deadline counts from the start of
the header, not from the last byte, so dripping one byte at a time does not extend it. The
body of a request and the time the app takes are not bounded by it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)


def _timeout_response() -> bytes:
    """The 408 a late client is sent before the connection closes."""
    body = b"request header not received in time\n"
    head = (
        b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
        b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body)
    )
    return head + body


class HeaderDeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose request header is not complete
    within :attr:`header_timeout_s` seconds of the connection opening (or of the previous
    response completing)."""

    header_timeout_s: ClassVar[float] = 10.0

    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_deadline()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        if self.conn.their_state is not h11.IDLE:  # a whole request header was parsed
            self._disarm_header_deadline()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._arm_header_deadline()  # the next request's header, on a kept-alive connection

    def _arm_header_deadline(self) -> None:
        self._disarm_header_deadline()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._header_late)

    def _disarm_header_deadline(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_late(self) -> None:
        """The deadline passed with no complete header: answer 408 and close."""
        self._header_timer = None
        if self.transport.is_closing():
            return
        log.debug("closing %s: no complete request header in %s s", self.client,
                  self.header_timeout_s)  # fmt: skip
        self.transport.write(_timeout_response())
        self.transport.close()


def header_deadline_protocol(header_timeout_s: float) -> type[HeaderDeadlineProtocol]:
    """The uvicorn ``http`` protocol class with a `header_timeout_s` header deadline."""
    if not header_timeout_s > 0:
        raise ValueError(f"header_timeout_s must be positive, got {header_timeout_s!r}")
    attrs: dict[str, Any] = {"header_timeout_s": float(header_timeout_s)}
    return type("HeaderDeadlineProtocol", (HeaderDeadlineProtocol,), attrs)
