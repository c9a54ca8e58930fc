"""The write-ahead segment: where the archive's records are durable before they are shards.

A segment is an append-only file of frames, each ``<length u32><crc32 u32><payload>``
(little-endian; the payload is one trajectory's JSON). :class:`Segment` appends with group
commit: every :meth:`~Segment.append` arriving within ``commit_window_ms`` of the first
waiting one is written with it and shares one fsync, and each caller returns only once its
frames are on disk. A kill mid-write leaves at most one torn frame at the tail;
:func:`replay` reads the whole frames back and cuts the rest off, so the next append never
lands behind garbage. A write that fails (disk full) is cut back to the last whole frame
and its callers get :class:`~shopbench.archive.errors.SegmentError`: nothing they did not
see acknowledged stays in the file.
"""

from __future__ import annotations

import asyncio
import os
import struct
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from shopbench.archive.durable import fsync_dir
from shopbench.archive.errors import SegmentError

_HEADER = struct.Struct("<II")
MAX_FRAME_BYTES = 64 * 1024 * 1024
"""A frame longer than this is torn or corrupt, never a record (a record is a few MB)."""

DEFAULT_COMMIT_WINDOW_MS = 2.0
"""How long the first waiting append holds the fsync open for others to join."""


def encode_frame(payload: bytes) -> bytes:
    """One frame: the payload's length and crc32, then the payload."""
    return _HEADER.pack(len(payload), zlib.crc32(payload)) + payload


def _decode(data: bytes) -> tuple[list[bytes], int]:
    """The whole frames at the start of `data`, and the offset where they end."""
    frames: list[bytes] = []
    at = 0
    while at + _HEADER.size <= len(data):
        length, crc = _HEADER.unpack_from(data, at)
        start = at + _HEADER.size
        if length > MAX_FRAME_BYTES or start + length > len(data):
            break
        payload = data[start : start + length]
        if zlib.crc32(payload) != crc:
            break
        frames.append(payload)
        at = start + length
    return frames, at


def replay(path: str | Path) -> tuple[list[bytes], int]:
    """The payloads of the whole frames of the segment at `path`, in order, and how many
    bytes of torn or corrupt tail were cut off the file (fsynced). A missing file is empty."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        return [], 0
    except OSError as e:
        raise SegmentError(f"{p}: cannot read the segment ({e.strerror or e})") from None
    frames, end = _decode(data)
    cut = len(data) - end
    if cut:
        try:
            with p.open("rb+") as f:
                f.truncate(end)
                f.flush()
                os.fsync(f.fileno())
        except OSError as e:
            raise SegmentError(f"{p}: cannot cut the torn tail ({e.strerror or e})") from None
    return frames, cut


class Segment:
    """One open write-ahead segment file, appended to with group commit.

    `items` collects, in commit order, the objects handed to :meth:`append` beside their
    payloads once those are durable: the store keeps the segment's records there until it
    rolls them into shards.
    """

    def __init__(
        self, path: str | Path, *, commit_window_ms: float = DEFAULT_COMMIT_WINDOW_MS,
        fsync: bool = True,
    ) -> None:
        self.path = Path(path)
        self.window_s = max(0.0, commit_window_ms) / 1000.0
        self.fsync = fsync
        try:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            self._size = os.fstat(self._fd).st_size
            fsync_dir(self.path.parent)
        except OSError as e:
            reason = f"{self.path}: cannot open the segment ({e.strerror or e})"
            raise SegmentError(reason) from None
        self.items: list[Any] = []
        self.commits = 0
        self._pending: list[tuple[bytes, Sequence[Any], asyncio.Future[None]]] = []
        self._flusher: asyncio.Task[None] | None = None
        self._broken: str | None = None
        self._closed = False

    @property
    def size(self) -> int:
        """Bytes of whole, durable frames in the file."""
        return self._size

    async def append(self, payloads: Sequence[bytes], items: Sequence[Any] = ()) -> None:
        """Write `payloads` as frames; returns once they are fsynced (with whatever else
        arrived in the same commit window). `items` join :attr:`items` at that moment.

        SegmentError when the disk refuses the write; then none of `payloads` is kept.
        """
        if self._closed:
            raise SegmentError(f"{self.path}: the segment is sealed")
        if self._broken is not None:
            raise SegmentError(self._broken)
        data = b"".join(encode_frame(p) for p in payloads)
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((data, items, fut))
        if self._flusher is None:
            self._flusher = asyncio.create_task(self._flush())
        await fut

    async def _flush(self) -> None:
        try:
            await asyncio.sleep(self.window_s)
            while self._pending:  # appends that arrived during the last fsync go next
                batch, self._pending = self._pending, []
                try:
                    await asyncio.to_thread(self._write, b"".join(d for d, _, _ in batch))
                except SegmentError as e:
                    for _, _, fut in batch:
                        if not fut.done():
                            fut.set_exception(SegmentError(str(e)))
                    continue
                self.commits += 1
                for _, items, fut in batch:
                    self.items.extend(items)
                    if not fut.done():
                        fut.set_result(None)
        finally:
            self._flusher = None

    def _write(self, data: bytes) -> None:
        try:
            view = memoryview(data)
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
            if self.fsync:
                os.fsync(self._fd)
        except OSError as e:
            reason = f"{self.path}: cannot append to the segment ({e.strerror or e})"
            try:  # cut back to the last whole frame so later appends stay readable
                os.ftruncate(self._fd, self._size)
                os.fsync(self._fd)
            except OSError as e2:
                self._broken = f"{reason}; cutting it back failed too ({e2.strerror or e2})"
            raise SegmentError(reason) from None
        self._size += len(data)

    async def drain(self) -> None:
        """Wait until every append already made has been committed or refused."""
        while self._flusher is not None:
            await asyncio.shield(self._flusher)

    async def seal(self) -> None:
        """Refuse further appends, wait for the ones in flight, close the file."""
        self._closed = True
        await self.drain()
        try:
            os.close(self._fd)
        except OSError as e:
            reason = f"{self.path}: cannot close the segment ({e.strerror or e})"
            raise SegmentError(reason) from None
