"""How uvicorn runs the service (its proxy and connection settings, decided here once), and
running it on a loopback port inside this process (the API bench, the tests)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from shopbench.archive.errors import SinkError
from shopbench.traces.api.config import ApiConfig

_DEFAULTS = ApiConfig(root=".")


def proxy_options(trusted_proxies: Sequence[str]) -> dict[str, Any]:
    """uvicorn's proxy settings for `trusted_proxies` (``ApiConfig.trusted_proxies``), the
    one place they are decided. None trusted: proxy headers off, so the client is the
    socket's peer whatever X-Forwarded-For says (uvicorn's own default would read it from
    any peer on 127.0.0.1, which every local reverse proxy and every local client is).
    Otherwise uvicorn's ``forwarded_allow_ips``: only a request whose peer is one of them
    has its X-Forwarded-For honoured."""
    trusted = list(trusted_proxies)
    return {"proxy_headers": bool(trusted), "forwarded_allow_ips": trusted}


def connection_options(header_timeout_s: float, keep_alive_s: float) -> dict[str, Any]:
    """uvicorn's connection settings (``ApiConfig.header_timeout_s``, ``keep_alive_s``): its
    h11 protocol with a deadline on each request header
    (:class:`~shopbench.traces.api.connections.HeaderDeadlineProtocol`: a connection with
    no complete header within `header_timeout_s` is answered 408 and closed; uvicorn has no
    such deadline of its own), and an idle kept-alive connection closed after
    `keep_alive_s`."""
    from shopbench.traces.api.connections import header_deadline_protocol

    return {
        "http": header_deadline_protocol(header_timeout_s),
        "timeout_keep_alive": keep_alive_s,
    }


def uvicorn_options(config: ApiConfig) -> dict[str, Any]:
    """Every uvicorn setting `config` decides: :func:`proxy_options` and
    :func:`connection_options`."""
    return {
        **proxy_options(config.trusted_proxies),
        **connection_options(config.header_timeout_s, config.keep_alive_s),
    }


@contextmanager
def serving(
    app: Any,
    host: str = "127.0.0.1",
    start_timeout_s: float = 15.0,
    *,
    trusted_proxies: Sequence[str] = (),
    header_timeout_s: float = _DEFAULTS.header_timeout_s,
    keep_alive_s: float = _DEFAULTS.keep_alive_s,
) -> Iterator[str]:
    """Serve `app` with uvicorn on a free port of `host` in a background thread for the
    duration of the block, X-Forwarded-For read only from `trusted_proxies`
    (:func:`proxy_options`), each request header due within `header_timeout_s`
    (:func:`connection_options`); yields the base URL (``http://host:port``)."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(
        app, log_level="error", lifespan="off", **proxy_options(trusted_proxies),
        **connection_options(header_timeout_s, keep_alive_s),
    ))  # fmt: skip
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout_s
    while not server.started and time.monotonic() < deadline and thread.is_alive():
        time.sleep(0.02)
    if not server.started:
        sock.close()
        raise SinkError(f"the archive service did not start on {host}:{port}")
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
