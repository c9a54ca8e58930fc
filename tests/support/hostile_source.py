"""A hostile archive source over real HTTP: it serves a real archive folder as the service's
mirror does (files, and folders as HTML link lists that fsspec walks), and lies where told —
extra links and files of its own, and shards that never end.

Its loops are bounded: an endless shard stops after ``endless_bytes`` even if nobody hangs up.
"""

from __future__ import annotations

import html
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit


@dataclass
class Lies:
    """What the source says beyond the real folder."""

    links: dict[str, list[str]] = field(default_factory=dict)  # folder → extra hrefs
    files: dict[str, bytes] = field(default_factory=dict)  # path → bytes served as a file
    endless: set[str] = field(default_factory=set)  # shard paths served without end
    endless_bytes: int = 64 << 20
    hidden: set[str] = field(default_factory=set)  # real paths it pretends are not there
    served_bytes: int = 0


def _handler(root: Path, lies: Lies) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *args: object) -> None:  # quiet
            return

        def _path(self) -> str:
            return unquote(urlsplit(self.path).path).lstrip("/")

        def do_HEAD(self) -> None:  # noqa: N802
            self._answer(body=False)

        def do_GET(self) -> None:  # noqa: N802
            self._answer(body=True)

        def _answer(self, *, body: bool) -> None:
            path = self._path()
            if path in lies.endless:
                self._endless(path, body)
                return
            if path in lies.files:
                self._send(lies.files[path], "application/octet-stream", body)
                return
            if path in lies.hidden:
                self.send_error(404)
                return
            local = root / path
            if path and local.is_file() and root.resolve() in local.resolve().parents:
                self._send(local.read_bytes(), "application/octet-stream", body)
                return
            folder = path.rstrip("/")
            names = self._children(folder)
            if not names:
                self.send_error(404)
                return
            links = "".join(
                f'<li><a href="{html.escape(h, quote=True)}">x</a></li>' for h in names
            )
            self._send(f"<!doctype html><ul>{links}</ul>".encode(), "text/html", body)

        def _children(self, folder: str) -> list[str]:
            base = root / folder if folder else root
            hrefs: list[str] = []
            if base.is_dir() and root.resolve() in [*base.resolve().parents, base.resolve()]:
                for child in sorted(base.iterdir()):
                    rel = f"{folder}/{child.name}" if folder else child.name
                    if rel in lies.hidden:
                        continue
                    hrefs.append(f"/{rel}/" if child.is_dir() else f"/{rel}")
            return hrefs + lies.links.get(folder, [])

        def _send(self, data: bytes, media: str, body: bool) -> None:
            self.send_response(200)
            self.send_header("Content-Type", media)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if body:
                self.wfile.write(data)
                lies.served_bytes += len(data)

        def _endless(self, path: str, body: bool) -> None:
            real = (root / path).read_bytes()
            self.send_response(200)  # no length: the body ends when the connection does
            self.send_header("Content-Type", "application/octet-stream")
            self.end_headers()
            if not body:
                return
            sent = 0
            chunk = real + b"\0" * (1 << 16)
            try:
                while sent < lies.endless_bytes:
                    self.wfile.write(chunk)
                    sent += len(chunk)
                    lies.served_bytes += len(chunk)
                    chunk = b"\0" * (1 << 16)
            except (BrokenPipeError, ConnectionResetError):
                return

    return Handler


@contextmanager
def hostile_source(root: Path, lies: Lies) -> Iterator[str]:
    """Serve `root` with `lies` on a loopback port; yields the base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(root, lies))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
