"""Serving an app with uvicorn on a loopback socket, in a thread (arena, tests) or a process.

The socket is bound before uvicorn starts, so the port is known at once (port 0 picks a
free one) and nothing races for it.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import uvicorn


def bind(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """A listening-ready TCP socket on `host`:`port` (0: a free port)."""
    # The protocol must be IPPROTO_TCP, not 0: asyncio turns Nagle off only on accepted
    # sockets whose proto says TCP, and with Nagle on, every reply waits ~40 ms for the
    # peer's delayed ACK between its header and body writes.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    return sock


class BackgroundServer:
    """An ASGI app served by uvicorn in a daemon thread; a context manager.

    ``url`` is the base URL once started. ``stop`` lets the requests in flight finish for
    a grace period, then drops them and waits for the thread.
    """

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0) -> None:
        self._sock = bind(host, port)
        self.host, self.port = self._sock.getsockname()[:2]
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout_s: float = 10.0) -> BackgroundServer:
        """Start serving; raises RuntimeError if uvicorn is not up within `timeout_s`."""
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the server on {self.url} did not start")
            time.sleep(0.005)
        return self

    def stop(self, grace_s: float = 1.0, timeout_s: float = 10.0) -> None:
        """Stop serving: requests in flight get `grace_s` to finish, then are dropped."""
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(grace_s)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(timeout_s)
        self._sock.close()

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()
