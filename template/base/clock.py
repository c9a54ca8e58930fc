"""The start-up clock check: is this machine's clock close enough for signed requests?

``bittensor.http_auth`` refuses a request whose nonce (a timestamp) is more than 10 s old or
more than 2 s in the future. A validator whose clock is 3 s fast has every request refused;
a miner whose clock is 10 s slow refuses everyone. So both neurons ask NTP servers for the
clock's offset when they start (a plain SNTP query, RFC 4330) and refuse to start when it
is over the limit. When no server answers (no route, a firewall) the offset is unknown: the
neuron starts and logs a warning saying what to check.
"""

from __future__ import annotations

import logging
import socket
import struct
import time
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from shopbench.errors import ShopbenchError

log = logging.getLogger("template.clock")
NTP_PORT = 123
_NTP_EPOCH = 2_208_988_800  # seconds from 1900-01-01 (NTP) to 1970-01-01 (unix)
_PACKET = struct.Struct("!B B B b 11I")


class ClockError(ShopbenchError):
    """The clock is off by more than signed requests tolerate."""


class ClockReport(BaseModel):
    """The outcome of the check: the offset (server minus local, seconds) if measured."""

    model_config = ConfigDict(frozen=True)

    offset_s: float | None
    server: str | None
    errors: list[str]

    @property
    def measured(self) -> bool:
        return self.offset_s is not None


def _ntp_time(data: bytes, at: int) -> float:
    seconds, fraction = struct.unpack("!II", data[at : at + 8])
    return seconds - _NTP_EPOCH + fraction / 2**32


def sntp_offset(server: str, port: int = NTP_PORT, timeout_s: float = 2.0) -> float:
    """The local clock's offset from `server` in seconds (positive: the local clock is slow).

    OSError or ValueError when the server does not answer or answers nonsense.
    """
    request = b"\x1b" + 47 * b"\0"  # LI 0, version 3, mode 3 (client)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout_s)
        t1 = time.time()
        sock.sendto(request, (server, port))
        data, _ = sock.recvfrom(512)
        t4 = time.time()
    if len(data) < 48:
        raise ValueError(f"a {len(data)}-byte reply is not an NTP packet")
    mode = data[0] & 0x7
    if mode not in (4, 5):  # server or broadcast
        raise ValueError(f"reply mode {mode} is not a server's")
    t2, t3 = _ntp_time(data, 32), _ntp_time(data, 40)
    return ((t2 - t1) + (t3 - t4)) / 2


def measure(servers: Sequence[str], timeout_s: float = 2.0) -> ClockReport:
    """The offset from the first of `servers` ("host" or "host:port") that answers."""
    errors: list[str] = []
    for server in servers:
        host, sep, port = server.rpartition(":")
        if not sep or not port.isdigit():
            host, port = server, ""
        try:
            offset = sntp_offset(host, int(port) if port else NTP_PORT, timeout_s)
        except (OSError, ValueError) as e:
            errors.append(f"{server}: {e}")
            continue
        return ClockReport(offset_s=offset, server=server, errors=errors)
    return ClockReport(offset_s=None, server=None, errors=errors)


def check_clock(servers: Sequence[str], max_offset_s: float, timeout_s: float = 2.0) -> ClockReport:
    """Measure the clock; ClockError when it is off by more than `max_offset_s`.

    An unmeasurable clock is logged as a warning, not refused.
    """
    if not servers:
        return ClockReport(offset_s=None, server=None, errors=[])
    report = measure(servers, timeout_s)
    if report.offset_s is None:
        log.warning(
            "clock not verified: no NTP server answered (%s); keep the clock synchronised "
            "(chrony or systemd-timesyncd): signed requests older than 10 s or more than 2 s "
            "ahead are refused",
            "; ".join(report.errors) or "none configured",
        )
        return report
    if abs(report.offset_s) > max_offset_s:
        direction = "behind" if report.offset_s > 0 else "ahead of"
        raise ClockError(
            f"the clock is {abs(report.offset_s):.1f} s {direction} {report.server} (limit "
            f"{max_offset_s:g} s, --neuron.clock.max_offset_s): signed requests would be "
            "refused; synchronise it (chrony or systemd-timesyncd) and start again"
        )
    log.info("clock offset %.3f s from %s", report.offset_s, report.server)
    return report
