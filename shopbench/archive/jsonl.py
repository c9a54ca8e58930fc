"""The JSONL archive: an append-only file of signed trajectories, and its reader.

The archive proper (:class:`~shopbench.archive.store.ArchiveStore`: a write-ahead segment
rolled into signed Parquet shards) is what validators and the arena write; :class:`JsonlSink`
implements the same :class:`~shopbench.archive.sink.ArchiveSink` interface as one
append-only file — one trajectory per line, flushed and fsynced before the acknowledgement
— for the validator bench and for JSONL exports and readers. A kill during a write can leave
at most one torn last line; the next open cuts it off, and readers skip it.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from pydantic import ValidationError

from shopbench.archive.errors import SinkError
from shopbench.errors import first_problem
from shopbench.records.trajectory import Trajectory

TRAJECTORIES_FILE = "trajectories.jsonl"


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
            why = first_problem(e, located=False)
            raise SinkError(f"{p}:{number}: not a trajectory ({why})") from None
