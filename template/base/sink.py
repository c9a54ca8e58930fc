"""Where the validator's signed trajectories go: the archive sink interface, and a JSONL sink.

An :class:`ArchiveSink` acknowledges a batch by returning from :meth:`~ArchiveSink.put`;
what it acknowledged must survive the validator being killed the next instant. The archive
proper (Parquet shards, object storage, an HTTP API) implements the same interface;
:class:`JsonlSink` is the append-only file the validator and the arena use now: one
trajectory per line, flushed and fsynced before the acknowledgement. A kill during a
write can leave at most one torn last line; the next open cuts it off, and readers skip it.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from pydantic import ValidationError

from shopbench.errors import ShopbenchError
from shopbench.signing import Signer, Verifier
from shopbench.trajectory import Signature, Trajectory

TRAJECTORIES_FILE = "trajectories.jsonl"


class SinkError(ShopbenchError):
    """The archive sink cannot store or read trajectories (disk full, bad file)."""


@runtime_checkable
class ArchiveSink(Protocol):
    """A durable destination for trajectories."""

    async def put(self, trajectories: Sequence[Trajectory]) -> int:
        """Store `trajectories`; once this returns they survive a crash. Returns the count."""
        ...

    async def close(self) -> None:
        """Release the sink."""
        ...


def sign_trajectory(trajectory: Trajectory, signer: Signer) -> Trajectory:
    """A copy of `trajectory` carrying `signer`'s signature over its signing payload."""
    unsigned = trajectory.model_copy(update={"signature": None})
    signature = Signature(signer=signer.hotkey, signature=signer.sign(unsigned.signing_payload()))
    return unsigned.model_copy(update={"signature": signature})


def verify_trajectory(trajectory: Trajectory, verifier: Verifier) -> bool:
    """Whether `trajectory` carries a valid signature by the hotkey it names."""
    sig = trajectory.signature
    if sig is None:
        return False
    return verifier.verify(trajectory.signing_payload(), sig.signature, sig.signer)


def _repair_tail(path: Path) -> int:
    """Cut a torn last line (no newline) off `path`; returns the bytes removed."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return 0
    if size == 0:
        return 0
    with path.open("rb+") as f:
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return 0
        # Scan back for the last newline in bounded chunks (a record is at most a few MB).
        end = size
        while end > 0:
            start = max(0, end - 65536)
            f.seek(start)
            chunk = f.read(end - start)
            at = chunk.rfind(b"\n")
            if at >= 0:
                keep = start + at + 1
                break
            end = start
        else:
            keep = 0
        f.truncate(keep)
        f.flush()
        os.fsync(f.fileno())
        return size - keep


class JsonlSink:
    """Appends trajectories to ``DIR/trajectories.jsonl``, one JSON object per line."""

    def __init__(self, directory: str | Path, *, fsync: bool = True) -> None:
        self.directory = Path(directory)
        self.path = self.directory / TRAJECTORIES_FILE
        self.fsync = fsync
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self.repaired_bytes = _repair_tail(self.path)
        except OSError as e:
            raise SinkError(f"{self.path}: cannot open the archive ({e.strerror or e})") from None
        self._lock = threading.Lock()
        self.acknowledged = 0

    def _append(self, lines: bytes) -> None:
        with self._lock:
            try:
                with self.path.open("ab") as f:
                    f.write(lines)
                    f.flush()
                    if self.fsync:
                        os.fsync(f.fileno())
            except OSError as e:
                raise SinkError(f"{self.path}: cannot append ({e.strerror or e})") from None

    async def put(self, trajectories: Sequence[Trajectory]) -> int:
        """Append `trajectories` and fsync; they are durable when this returns."""
        if not trajectories:
            return 0
        lines = b"".join(t.model_dump_json().encode() + b"\n" for t in trajectories)
        # Off the event loop: an fsync can take milliseconds, and episodes are in flight.
        await asyncio.to_thread(self._append, lines)
        self.acknowledged += len(trajectories)
        return len(trajectories)

    async def close(self) -> None:
        """Nothing is held open between writes; present for the interface."""
        return None


def read_trajectories(path: str | Path) -> Iterator[Trajectory]:
    """The trajectories of a JSONL archive file, in order; a torn last line is skipped.

    SinkError names the line of any other record that does not parse.
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise SinkError(f"{p}: cannot read ({e.strerror or e})") from None
    lines = data.split(b"\n")
    complete = lines[:-1]  # the part after the last newline is empty or torn
    for number, line in enumerate(complete, start=1):
        if not line.strip():
            continue
        try:
            yield Trajectory.model_validate_json(line)
        except ValidationError as e:
            first = e.errors(include_url=False)[0]
            raise SinkError(f"{p}:{number}: not a trajectory ({first['msg']})") from None
