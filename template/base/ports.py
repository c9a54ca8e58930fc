"""A port the neuron cannot bind: which one, and, where the system says, who holds it.

An operator who starts a second validator beside the first, or a miner on the port of an
old one still running, should read the port, the process holding it and what to change,
not an ``OSError`` traceback. The holder is read from Linux's ``/proc`` (the listening
socket's inode, then the process whose file descriptors include it); elsewhere, or for
another user's process, the message says only that the port is taken.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from template.base.neuron import NeuronError

_LISTEN = "0A"  # the TCP state /proc/net/tcp gives a listening socket


def _listening_inodes(port: int, proc: Path) -> set[str]:
    inodes: set[str] = set()
    for table in ("tcp", "tcp6"):
        try:
            rows = (proc / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) <= 9 or fields[3] != _LISTEN:
                continue
            if int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def port_holder(port: int, proc: Path = Path("/proc")) -> str | None:
    """``pid N (command line)`` of a process listening on TCP `port`, or None when the
    system does not say (not Linux, or another user's process)."""
    inodes = _listening_inodes(port, proc)
    if not inodes:
        return None
    wanted = {f"socket:[{inode}]" for inode in inodes}
    for pid_dir in proc.iterdir():
        if not pid_dir.name.isdigit():
            continue
        try:
            fds = list((pid_dir / "fd").iterdir())
        except OSError:
            continue  # gone, or not ours to read
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target in wanted:
                try:
                    raw = (pid_dir / "cmdline").read_bytes()
                except OSError:
                    raw = b""
                command = " ".join(raw.decode(errors="replace").replace("\0", " ").split())
                return f"pid {pid_dir.name} ({command[:120] or '?'})"
    return None


def bind_error(flag: str, host: str, port: int, error: OSError) -> NeuronError:
    """The start-up error for `flag`'s `host`:`port` that could not be bound: the port, who
    holds it where the system says, and what to change."""
    if error.errno == errno.EADDRINUSE:
        holder = port_holder(port)
        held = f"held by {holder}" if holder else "held by another process"
        return NeuronError(
            f"{flag} {port}: port {port} is in use ({held}); stop that process or give "
            f"{flag} another port"
        )
    if error.errno == errno.EACCES:
        return NeuronError(
            f"{flag} {port}: not allowed to bind port {port} (ports below 1024 need root); "
            f"give {flag} a port of 1024 or more"
        )
    reason = error.strerror or error
    return NeuronError(f"{flag} {port}: cannot bind {host}:{port} ({reason})")
