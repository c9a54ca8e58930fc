"""`shopbench traces serve` closes a connection that sends no complete request header in
time (slowloris), while complete requests are answered as ever.

The real command runs in a subprocess on a loopback port with ``--header-timeout 1``; raw
sockets send part of a header, drip one byte at a time, or send a second header slowly on a
kept-alive connection, and each is answered 408 and closed. Waits for a close are bounded
generously (30 s): the tests say *that* the server closes, not how fast.
"""

from __future__ import annotations

import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.object_store import free_port

WAIT_S = 30.0


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """``traces serve`` over an empty archive folder, header deadline 1 s: (host, port)."""
    root = tmp_path_factory.mktemp("archive")
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "shopbench.cli", "traces", "serve", "--root", str(root),
         "--port", str(port), "--header-timeout", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"traces serve exited {proc.returncode}: {proc.stderr.read()}")  # type: ignore[union-attr]
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        else:
            pytest.fail("traces serve did not start listening")
        yield "127.0.0.1", port
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (at most WAIT_S)."""
    sock.settimeout(WAIT_S)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except TimeoutError:
        pytest.fail(f"the server kept the connection open {WAIT_S} s (got {data[:80]!r})")
    except ConnectionResetError:
        pass
    return data


def read_response(sock: socket.socket) -> tuple[int, bytes]:
    """One HTTP response on a kept-alive connection: its status and body."""
    sock.settimeout(WAIT_S)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"closed before a response: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = next(int(v) for k, _, v in (x.partition(":") for x in lines[1:])
                  if k.strip().lower() == "content-length")  # fmt: skip
    while len(body) < length:
        body += sock.recv(65536)
    return int(lines[0].split()[1]), body


def test_a_partial_header_is_answered_408_and_closed(served: tuple[str, int]) -> None:
    with socket.create_connection(served) as sock:
        sock.sendall(b"GET /v1/manifests HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n")
        answer = read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 408 "), answer


def test_a_connection_that_sends_nothing_is_closed(served: tuple[str, int]) -> None:
    with socket.create_connection(served) as sock:
        assert read_until_closed(sock).startswith(b"HTTP/1.1 408 ")


def test_a_header_dripped_a_byte_at_a_time_is_closed_at_its_deadline(
    served: tuple[str, int],
) -> None:
    header = b"GET /v1/manifests HTTP/1.1\r\nHost: localhost\r\nX-Pad: " + b"a" * 200 + b"\r\n\r\n"
    sent = 0
    with socket.create_connection(served) as sock:
        try:
            for byte in header:  # 0.1 s apart: the whole header would take 25 s
                sock.sendall(bytes([byte]))
                sent += 1
                if select.select([sock], [], [], 0.1)[0]:
                    break  # the server answered (or closed) before the header was complete
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer = read_until_closed(sock)
    assert sent < len(header), "every byte was accepted: the deadline moved with each byte"
    assert answer.startswith(b"HTTP/1.1 408 "), answer


def test_a_kept_alive_connection_has_a_deadline_for_each_header(
    served: tuple[str, int],
) -> None:
    with socket.create_connection(served) as sock:
        sock.sendall(b"GET /v1/manifests HTTP/1.1\r\nHost: localhost\r\n\r\n")
        status, body = read_response(sock)
        assert status == 200 and body.startswith(b"{")
        # The next request's header never ends: uvicorn's keep-alive timer is cancelled by
        # its first byte, so only the header deadline closes this connection.
        sock.sendall(b"GET /v1/manifests HTTP/1.1\r\nHost: local")
        assert read_until_closed(sock).startswith(b"HTTP/1.1 408 ")


def test_complete_requests_are_answered_as_ever(served: tuple[str, int]) -> None:
    host, port = served
    with httpx.Client(base_url=f"http://{host}:{port}", timeout=WAIT_S) as client:
        for path in ("/v1/manifests", "/", "/v1/manifests"):
            assert client.get(path).status_code == 200
    with socket.create_connection(served) as sock:  # in two parts, within the deadline
        sock.sendall(b"GET /v1/manifests HTTP/1.1\r\n")
        time.sleep(0.2)
        sock.sendall(b"Host: localhost\r\nConnection: close\r\n\r\n")
        assert read_response(sock)[0] == 200


def test_the_deadline_is_a_serve_option_with_a_bound(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from shopbench.cli import main

    def serve(*argv: str) -> int:
        try:
            main(["traces", "serve", *argv])
        except SystemExit as e:
            return int(e.code or 0)
        return 0

    assert serve("--help") == 0
    assert serve("--root", str(tmp_path), "--header-timeout", "0") == 2
    help_text, err = capsys.readouterr()
    assert "--header-timeout" in help_text and "slowloris" in help_text
    assert "--header-timeout" in err and "greater than 0" in err


def test_serving_in_process_takes_the_same_deadline(tmp_path: Path) -> None:
    from shopbench.traces.api.app import create_app
    from shopbench.traces.api.config import ApiConfig
    from shopbench.traces.api.server import serving

    app = create_app(ApiConfig(root=str(tmp_path)))
    with serving(app, header_timeout_s=0.5) as url:
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port))) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\n")
            assert read_until_closed(sock).startswith(b"HTTP/1.1 408 ")
        assert httpx.get(f"{url}/v1/manifests", timeout=WAIT_S).status_code == 200
